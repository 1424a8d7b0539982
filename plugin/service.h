/* What the plugin service's files share (private to plugin/; instance.h has what plugin.c and
 * state.c call). service.c runs the thread and owns the engine; the others are its parts:
 *   block_pool.c     the blocks run() records into
 *   take_folder.c    where a take's folder goes and what it is named
 *   take_jobs.c      finished takes to engine jobs: on disk first, waiting for an install,
 *                    resumed after the host stopped, stopped when the plugin goes
 *   job_status.c     a job's progress and result back to run()
 *   audition.c       a finished take's stems read back for run() to play
 *   device_choice.c  the Device control, the device table announced, saved device keys
 *   model_watch.c    install requests, the model list and a missing model's warning
 *
 * Threads: everything here runs on the service thread, or on a host's non-real-time thread
 * (instantiate, cleanup) while the service does not hold the instance; never in run().
 */
#ifndef SB_SERVICE_H
#define SB_SERVICE_H

#include "instance.h"

#include "stembridge.h"

/* service.c */
/* Engine and service messages to the LV2 log of some live instance (an sb_logger's fn). */
void sb_service_log(void *user, sb_log_level level, const char *msg);
/* The shared engine, started on first use; under the service lock. NULL (logged once) when it
 * cannot start. */
sb_engine *sb_service_engine(void);
/* The k-th accelerator's key and saved name from the engine's table, when the engine runs;
 * never starts it. false: no engine yet, or no such device. */
bool sb_service_accel_key(size_t k, char *key, size_t klen, char *name, size_t nlen);
/* A status message to run(), with the instance's nrt_* state. */
void sb_service_post(sb_instance *self, sb_msg_kind kind, const char *text);
/* Jobs of any instance submitted before job id and not finished yet: the takes a queued one
 * waits behind. Under the service lock. */
int sb_service_jobs_before(sb_job_id id);
/* Fills every instance's record pool (between pieces of a long write; user is unused). */
void sb_service_refill_pools(void *user);

/* block_pool.c */
/* Keeps free_blocks at the depth run() needs now (deeper while freewheeling). */
void sb_blocks_refill(sb_instance *self);
/* A take's blocks, back to the service's spare list. */
void sb_blocks_give_back(sb_instance *self, sb_block *b);
/* Frees every block the instance has (cleanup: run() no longer runs). */
void sb_blocks_free(sb_instance *self);

/* take_folder.c */
/* The folder take folders go in; *session gets the Ardour session folder ("" elsewhere). */
bool sb_take_folder_root(sb_instance *self, const sb_props *pr, char *root, size_t len,
                         char *session, size_t slen);
/* The name a take's files carry (trackName, or "track-<instanceId>"), file-name safe. */
void sb_take_folder_track(sb_instance *self, const sb_props *pr, char *out, size_t len);
/* Reserves "<root>/<track>-take<N>" with a new N; *made_root: the root did not exist. */
bool sb_take_folder_make(sb_instance *self, const char *root, const char *session,
                         const char *track, char *take, size_t tlen, char *dir, size_t dlen,
                         bool *made_root);
/* Removes a take's folder when empty, and the root when the take made it. */
void sb_take_folder_remove(const char *dir, bool made_root);

/* take_jobs.c */
/* A take run() finished: to disk, then to the engine (or said why not). */
void sb_takes_submit(sb_instance *self, sb_take *t);
/* The install of 'name' ended: the takes that waited for it run, or fail with its reason. */
void sb_takes_install_ended(sb_instance *self, const char *name, sb_status result,
                            const char *why);
/* Runs again the takes of this instance's track that a stopped host left unfinished. */
void sb_takes_resume(sb_instance *self);
/* Cleanup: cancels the instance's jobs, puts takes that just ended on disk to run when the
 * session opens again, and frees the takes waiting for an install. Under the service lock. */
void sb_takes_stop(sb_instance *self, sb_engine *e);
/* A take whose job could not run or failed: its journal is marked failed and text says where
 * the recording is kept, or, never written, its folder goes and text is msg. */
void sb_take_failed_text(sb_instance *self, sb_take_files *f, const char *dir, bool made_root,
                         const char *msg, char *text, size_t len);

/* job_status.c */
/* Each active job's progress, device and result, posted to run(). */
void sb_jobs_poll(sb_instance *self, sb_engine *e);

/* audition.c */
void sb_audition_free(sb_audition *a);
/* Reads a finished take's stems (paths by stem, "" where none) into memory and offers them to
 * run() with what the UI shows of each (r: the engine's peak and RMS); a take too long to hold
 * is shown, not held (logged). */
void sb_audition_load(sb_instance *self, int64_t start, int64_t frames,
                      char paths[SB_PLUGIN_STEMS][SB_TEXT], const sb_job_result *r);

/* device_choice.c */
/* The name state saves for a device: its name and platform. */
void sb_device_saved_name(const sb_device *d, char *name, size_t len);
/* The Device control value that shows a device key (-1: none), from the announced table. */
int sb_device_port_of_key(sb_instance *self, const char *key);
/* Announces the engine's accelerators to run() (patch:Put of the deviceList). */
void sb_device_list_publish(sb_instance *self, sb_engine *e);
/* Resolves the device state restored, and says which device that is (or its fallback). */
void sb_device_resolve_saved(sb_instance *self, sb_engine *e);

/* model_watch.c */
/* Install requests from run(), the model list and install status for run(), and a warning
 * when the Model control names a model that is not installed. */
void sb_model_watch(sb_instance *self);

#endif
