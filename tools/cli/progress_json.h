/* `stembridge separate --progress json`: what a front end (the Ardour action, a script) reads
 * on standard output instead of a drawn bar, one JSON object a line, flushed at once:
 *   {"event":"start","pid":P,"inputs":N}                          first, before any work
 *   {"event":"progress","input":I,"file":F,"fraction":x,"overall":y,"eta_s":s,"stage":S}
 *   {"event":"warning","message":M}
 *   {"event":"done","input":I,"file":F,"manifest":M,"stems_txt":T,"stems":[{"stem","path"}]}
 *   {"event":"failed","input":I,"file":F,"status":S,"message":M}
 *   {"event":"end","exit":E,"message":M}                          last: E is the exit status
 * I counts inputs from 0 in the order given; eta_s is -1 while not known. */
#ifndef SB_CLI_PROGRESS_JSON_H
#define SB_CLI_PROGRESS_JSON_H

#include "stembridge.h"

void sb_cli_json_start(int n_inputs);
/* One line per input whose progress moved (by 1 % or a second since its last line). */
void sb_cli_json_progress(sb_engine *e, const sb_job_id *ids, const int *ok,
                          const char *const *inputs, int n, double t0);
void sb_cli_json_warning(const char *message);
void sb_cli_json_done(int i, const char *input, const sb_job_result *r);
void sb_cli_json_failed(int i, const char *input, sb_status st, const char *message);
void sb_cli_json_end(int exit_status, const char *message);

#endif
