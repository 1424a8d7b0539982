/* Takes that survive the host: a take's audio and its journal on disk, in the take's folder,
 * before its job starts, so that a host killed (or quit) while the job runs loses nothing: the
 * instance restored with the session finds the take and runs it again from the file.
 *
 * FILES, in the take's folder "<root>/<id>/" (id = "<track>-take<N>", the folder's own name):
 *   <id>-recording.wav   the audio as recorded: 32-bit float WAV (sb_wav_writer), the region's
 *                        start as its Broadcast-WAV time reference
 *   <id>-journal.json    what the job needs to run again (below)
 * Each is written under a temporary name of ours (io/temp_file.h), synced, renamed into place,
 * and the folder synced: the recording first, then the journal, which commits the take. A
 * folder with a journal holds a complete recording; a failed write leaves neither.
 *
 * THE JOURNAL (JSON, "stembridge_take": 1): id, instance (the plugin's instanceId), track,
 * take, rate, channels, frames, timeline_start, model (the Model control's choice by name:
 * "auto", "builtin", ...), model_file ("" none), stems (the toggles as a mask, bit s =
 * canonical stem s), device (what the job asks for: a stable key, "auto", "cpu", "all",
 * "device:N"), device_port, mode ("parallel" | "sequential"), precision ("fp32" | "bf16"),
 * keep_audio, out_dir (the take's folder: the stems go there), recording (the WAV's file name),
 * status ("pending" | "failed"), error ("" or why it failed).
 *
 * A TAKE'S LIFE: pending (journal "pending", no manifest) until its job commits the stems;
 * then the journal goes, and the recording too unless it is kept. A failed job keeps both, the
 * journal marked "failed" with the reason, and is not run again by itself. While a process runs
 * a take it holds an flock() on its journal (the descriptor in sb_take_files.lock): a scan in
 * this process or another never takes a take that is running; a killed host's lock is gone
 * with it. A folder whose manifest is there has committed stems whatever its journal says.
 *
 * Threads: the plugin's service thread (every call may block on the disk). Errors come back
 * as a status and a sentence in 'why'; nothing here posts to the UI.
 */
#ifndef SB_TAKE_STORE_H
#define SB_TAKE_STORE_H

#include "stembridge.h"

#include <stdbool.h>
#include <stdint.h>

#define SB_TAKE_PATH 4096

typedef struct {
	char id[320];
	char instance[16];
	char track[256], take[64];
	double rate;
	int channels;
	int64_t frames, timeline_start;
	char model[32];
	char model_file[SB_TAKE_PATH];
	unsigned stems;
	char device[640];
	int device_port;
	int sequential;
	int bf16;
	int keep_audio;
	char out_dir[SB_TAKE_PATH];
	char status[16];
	char error[1024];
} sb_take_journal;

/* Where a take is on disk. audio and journal are "" when that file is not there. */
typedef struct {
	char audio[SB_TAKE_PATH];
	char journal[SB_TAKE_PATH];
	int lock;                   /* the journal, flock'ed by this process; -1 none */
} sb_take_files;

void sb_take_files_init(sb_take_files *f);

/* Writes the recording and then the journal (status "pending") into j->out_dir, which exists.
 * idle(idle_user) is called between pieces of a long write (the service keeps the record
 * pools of every instance full meanwhile). On success f names both files and holds the
 * journal's lock. On failure nothing of it is left, f is empty and why says what failed
 * (SB_ERR_NOSPACE for a full disk). */
sb_status sb_take_save(const sb_take_journal *j, const float *samples, void (*idle)(void *),
                       void *idle_user, sb_take_files *f, char *why, size_t wlen);

/* Opens and claims a journal found by a scan: SB_ERR_EXISTS when a running job holds it (here
 * or in another process), SB_ERR_FORMAT when it cannot be read or a value is damaged (why says
 * which; the file is left as it is), SB_ERR_IO when it cannot be opened. On SB_OK, j holds the
 * journal and f the claimed files (audio "" when the recording is missing). */
sb_status sb_take_open(const char *journal, sb_take_journal *j, sb_take_files *f, char *why,
                       size_t wlen);

/* Reads a claimed take's recording back (io/audio_file.h), checked against its journal:
 * *samples (interleaved, the caller frees) of j->frames frames. */
sb_status sb_take_read_audio(const sb_take_files *f, const sb_take_journal *j, float **samples,
                             const sb_logger *log, char *why, size_t wlen);

/* The take's stems are committed (its manifest is there). */
bool sb_take_committed(const sb_take_journal *j);

/* The job committed the take's stems: the journal goes, the recording too unless keep_audio;
 * the folder is synced; the lock is released. */
void sb_take_done(sb_take_files *f, bool keep_audio);
/* The job failed: the journal is marked "failed" with the reason (written anew, synced,
 * renamed over the old one) and the lock released; the recording stays. */
sb_status sb_take_failed(sb_take_files *f, const char *error, char *why, size_t wlen);
/* Releases the lock and leaves the files as they are (a job cancelled as the host closes:
 * the take is pending and runs again when the session is reopened). */
void sb_take_release(sb_take_files *f);

/* N of a name "<track>-take<N>" or "<track>-take<N>-...", 0 for any other name. */
uint32_t sb_take_number(const char *name, const char *track);

/* The journals of the take folders in root whose names are "<track>-take<N>": found(user,
 * journal path) for each, in no particular order. Returns how many. */
int sb_take_scan(const char *root, const char *track,
                 void (*found)(void *user, const char *journal), void *user);

#endif
