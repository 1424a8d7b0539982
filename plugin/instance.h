/* One plugin instance as seen by its three sides: run() (real time), the plugin service thread
 * (service.c and the files service.h lists; non-real-time, one per process) and the host's
 * state calls (state.c).
 *
 * Who touches what:
 *  - rt_*: run() only.
 *  - rings: single producer, single consumer, as named on each.
 *  - atomics: device_list and audition_pending (service -> run(), pointer handoff),
 *    audition_retired (run() -> service, freed there), the flags and alarms (one writer each).
 *  - props: written by run() (patch:Set) or restore() under a sequence lock, read by anyone
 *    through sb_props_read(); run() never waits for a reader.
 *  - nrt_*: non-real-time threads only, under nrt_lock (never taken by run()).
 */
#ifndef SB_INSTANCE_H
#define SB_INSTANCE_H

#include "realtime.h"
#include "take_store.h"
#include "take_wave.h"
#include "uris.h"

#include <lv2/atom/forge.h>
#include <lv2/log/logger.h>
#include <lv2/state/state.h>
#include <lv2/urid/urid.h>
#include <lv2/worker/worker.h>

#include <pthread.h>
#include <stdbool.h>

#define SB_BLOCK_FRAMES 16384u
#define SB_TAKES 4               /* take descriptors per instance */
#define SB_POOL_REALTIME 16      /* blocks kept ready while playing in real time (~5 s) */
#define SB_POOL_FREEWHEEL 512    /* blocks kept ready while freewheeling (~3 min at 48 kHz) */
#define SB_TEXT 4096
#define SB_MAX_JOBS 8

/* A piece of recorded audio, interleaved, SB_BLOCK_FRAMES * channels floats. */
typedef struct sb_block {
	struct sb_block *next;
	uint32_t used;
	float data[];
} sb_block;

/* A recorded region, filled by run() and handed to the service when it stops. */
typedef struct {
	sb_block *first, *last;
	int64_t frames;
	int64_t timeline_start;
	int64_t lost;           /* frames dropped because the block pool ran dry (never expected) */
	float peak;             /* the largest |sample| recorded: a silent take is not separated */
	int device_port, mode, model, bf16;
	unsigned stems;
	uint32_t serial;
} sb_take;

/* What run() asks of the service besides takes. */
typedef struct {
	char install[64];       /* a model's name to install */
} sb_request;

/* Status from the service to run(). */
typedef enum {
	SB_MSG_STATUS = 0,
	SB_MSG_MANIFEST,        /* text: the manifest path; start, frames: the region */
	SB_MSG_STEMS,           /* text: the stem paths, one per line */
	SB_MSG_DEVICE_IN_USE,   /* text: the device's label, the fallback reason when there is one */
	SB_MSG_ERROR,           /* text: the error in words */
	SB_MSG_MODELS,          /* text: the model list (SB__modelList's lines) */
	SB_MSG_INSTALL,         /* text: the install's status; progress: its fraction */
	SB_MSG_SILENT,          /* text: why the take was not separated (SB_STATE_SILENT) */
	SB_MSG_NOTICE           /* text: the Model control's model is not installed; "" it is */
} sb_msg_kind;
typedef struct {
	sb_msg_kind kind;
	int state;              /* SB_STATE_* */
	float progress;
	float time_left;        /* seconds, -1 not known */
	int device;             /* SB_PORT_DEVICE_OUT numbering */
	int fallback;
	uint32_t jobs_done;
	int take;               /* the take number state and progress speak of, 0 none */
	int ahead;              /* takes queued or running before it (any track) */
	int64_t start, frames;
	char text[SB_TEXT];
} sb_msg;

/* Stems of the last take, read back for audition and for the UI's stem rows; immutable once
 * handed to run(). */
#define SB_VIEW_COLS 256
typedef struct {
	int64_t start, frames;
	int channels;
	bool held;                    /* the stems are in memory: audition plays */
	float *stem[SB_PLUGIN_STEMS]; /* interleaved, by canonical index; NULL where not written,
	                                 or where the take is too long to hold */
	/* what the UI shows of each stem written (shown[s]): the engine's peak and RMS, and min,
	 * max of each of SB_VIEW_COLS columns */
	bool shown[SB_PLUGIN_STEMS];
	float peak[SB_PLUGIN_STEMS], rms[SB_PLUGIN_STEMS];
	float view[SB_PLUGIN_STEMS][2 * SB_VIEW_COLS];
} sb_audition;

/* Properties set through patch:Set and state. */
typedef struct {
	char output_dir[SB_TEXT];
	char model_file[SB_TEXT];   /* "" none: the Model control names the model */
	char track[256];
	float max_minutes;
	float ui_scale;             /* the UI's own zoom, 0 none (SB__uiScale) */
} sb_props;

typedef struct {
	LV2_URID atom_Blank, atom_Object, atom_Path, atom_String, atom_Float, atom_Long, atom_Int,
		atom_Double, atom_Bool, atom_URID, atom_Sequence, atom_Tuple, atom_eventTransfer;
	LV2_URID time_Position, time_frame, time_speed;
	LV2_URID patch_Set, patch_Get, patch_Put, patch_body, patch_property, patch_value,
		patch_subject;
	LV2_URID sb_outputDir, sb_modelFile, sb_manifest, sb_deviceKey, sb_deviceName,
		sb_deviceInUse, sb_lastError, sb_recordedFrames, sb_timelineStart, sb_maxMinutes, sb_trackName,
		sb_devicePort, sb_mode, sb_model, sb_stemMask, sb_precision, sb_keepTake, sb_stems, sb_deviceList,
		sb_devicePlatform, sb_deviceType, sb_deviceMemory, sb_deviceUnits, sb_deviceDriver,
		sb_modelList, sb_installModel, sb_installStatus, sb_instanceId, sb_lastTake,
		sb_uiScale, sb_modelNotice, sb_jobTake, sb_queueAhead, sb_takeWave, sb_takeWaveFrames,
		sb_takeStart, sb_takeFrames, sb_stemViews, sb_stemIndex, sb_stemPeak, sb_stemRms,
		sb_stemWave;
} sb_urids;

typedef struct sb_instance {
	/* host */
	LV2_URID_Map *map;
	LV2_Log_Logger logger;
	LV2_State_Make_Path *make_path;
	LV2_State_Free_Path *free_path;
	LV2_Worker_Schedule *schedule; /* starts the service thread when first needed */
	sb_urids u;
	LV2_Atom_Forge forge;
	LV2_Atom_Forge_Frame notify_frame; /* the sequence being written during run() */
	double rate;
	int channels;
	unsigned serial;        /* process-wide instance number, for log lines */

	/* ports */
	const LV2_Atom_Sequence *control;
	LV2_Atom_Sequence *notify;
	const float *ctl[SB_PORT_JOBS_DONE_OUT + 1];
	float *out_state, *out_progress, *out_device, *out_fallback, *out_jobs, *out_time_left;
	const float *in[2];
	float *out[2];
	const float *freewheel;
	const float *ctl_stem_extra[2]; /* the guitar and piano toggles (ports after the audio) */
	const float *ctl_precision;     /* the Precision control: 1 = bf16 products */
	const float *ctl_keep_take;     /* the Keep take audio control: 1 = keep each take's WAV */

	/* run() only */
	int64_t rt_pos;
	float rt_speed;
	bool rt_have_pos;
	bool rt_recording;
	bool rt_limit_hit;      /* recording limit reached: wait for disarm or stop */
	sb_take *rt_take;
	sb_block *rt_block;
	uint32_t rt_take_serial;
	int rt_state;
	float rt_progress, rt_time_left;
	int rt_device, rt_fallback;
	uint32_t rt_jobs_done;
	sb_audition *rt_audition;
	char rt_manifest[SB_TEXT];
	char rt_device_in_use[SB_TEXT];
	char rt_error[SB_TEXT];
	char rt_stems[SB_TEXT];
	char rt_models[SB_TEXT];    /* the model list, as the service sent it */
	char rt_install[SB_TEXT];   /* the install's status */
	int64_t rt_start, rt_frames;
	int64_t rt_reported_frames; /* recordedFrames last announced while recording */
	const LV2_Atom *rt_device_list; /* the list last announced */
	sb_msg rt_msg;          /* where read_status() copies each message */
	bool rt_announce;       /* manifest etc. pending on notify */
	bool rt_announce_device, rt_announce_error, rt_announce_props, rt_announce_stems,
		rt_announce_devices, rt_announce_limit, rt_announce_models, rt_announce_install;
	bool rt_listener;       /* a patch:Get arrived: someone (the UI) reads the messages */
	bool rt_service_asked;  /* run() scheduled the work that starts the service */
	float rt_peak;          /* of the take being recorded */
	/* the take lane's feed: the waveform of the take being recorded (or the last one), its
	 * start and length, the length it had when last sent */
	sb_wave rt_wave;
	int64_t rt_wave_start, rt_wave_frames, rt_wave_sent;
	bool rt_wave_valid, rt_announce_wave, rt_announce_view, rt_announce_notice, rt_announce_job;
	char rt_notice[SB_TEXT];    /* the model notice */
	int rt_job_take, rt_ahead;  /* as the service last said */
	int rt_job_take_sent, rt_ahead_sent; /* as last announced (-1: never) */

	/* rings */
	sb_ring free_blocks;    /* service -> run(): sb_block* */
	sb_ring free_takes;     /* service -> run(): sb_take* */
	sb_ring finished;       /* run() -> service: sb_take* */
	sb_ring status;         /* service -> run(): sb_msg */
	sb_ring requests;       /* run() -> service: sb_request (an install asked for by the UI) */
	_Atomic(sb_audition *) audition_pending; /* service -> run() */
	_Atomic(sb_audition *) audition_retired; /* run() -> service, freed there */
	/* patch:Put of the deviceList, forged by the service once the engine knows its devices; freed
	 * only at cleanup, so run() may keep reading it */
	_Atomic(const LV2_Atom *) device_list;
	atomic_int freewheeling;
	atomic_int lost_frames_alarm;
	atomic_int no_take_alarm;   /* run() found no free take descriptor: recording skipped */
	atomic_int props_changed;   /* restore() -> run(): announce the properties */
	atomic_int bad_path_alarm;  /* run() ignored a damaged patch:Set: 1 modelFile, 2 outputDir */
	atomic_int folder_from_model_slot; /* a folder came through modelFile (Carla's one slot) */
	atomic_int model_port;      /* run() -> service: the Model control's value, -1 unknown */
	atomic_int service_running; /* the service thread has this instance in its care */
	atomic_int keep_take;       /* run() -> service: the Keep take audio control */
	atomic_int resume_scan;     /* restore() -> service (through run()): look for takes left
	                               pending by a host that stopped, and run them again */

	/* properties under a sequence lock */
	atomic_uint props_seq;
	sb_props props;

	/* non-real-time */
	LV2_Atom_Forge nrt_forge;   /* the service's, for the device list */
	pthread_mutex_t nrt_lock;
	char nrt_device_key[640];
	char nrt_device_name[256];
	int nrt_device_port;    /* the device port value nrt_device_key stands for, -1 none */
	char nrt_manifest[SB_TEXT];
	char nrt_id[16];        /* instanceId: stems are named after it when no trackName is set */
	uint32_t nrt_last_take; /* the last take number used (saved: a reopened session goes on) */
	int nrt_scratch;        /* the host's makePath folder: 0 not asked yet, 1 lasting, -1 not */
	bool nrt_resolve;       /* restore asked the service to resolve the saved device */
	sb_take takes[SB_TAKES];
	sb_block *spare;        /* service's list of returned blocks */
	uint32_t pool_blocks;   /* blocks allocated and not freed */
	struct {
		uint64_t id;
		bool active;
		int64_t start, frames;
		char take[64];
		char dir[SB_TEXT];      /* the take's folder, reserved before the job */
		bool made_root;         /* the take made the folder above it too */
		sb_take_files files;    /* its recording and journal on disk (take_store.h) */
		bool keep_audio;        /* the journal's keep_audio */
		bool resumed;           /* run again after the host stopped: the state says so */
		unsigned stems;
		int take_no;            /* N of its folder's "<track>-take<N>" */
		int last_state, last_ahead;
		float last_progress, last_eta;
		int last_n_devices;
	} jobs[SB_MAX_JOBS];
	uint32_t jobs_done;
	int nrt_state, nrt_dev, nrt_fallback;
	int nrt_model_port;         /* the Model control value last looked at, -1 none */
	bool nrt_model_missing;     /* the chosen model is not installed (said in modelNotice) */
	int nrt_take, nrt_ahead;    /* sb_msg's take and ahead, for sb_service_post */
	unsigned nrt_models_gen;    /* the model list run() has: +1, as sb_models_generation() */
	double nrt_models_checked;  /* when the model list was last read */
	char nrt_models_text[SB_TEXT]; /* the list run() has */
	unsigned nrt_install_gen;   /* the install status run() has */
	/* takes whose model is being installed: they go to the engine when it is, or fail (the
	 * service's own type; NULL: free slot) */
	struct sb_ready_take *waiting[SB_TAKES];
	char nrt_dev_label[SB_TEXT];    /* the label of the device the last job ran on */
	bool nrt_have_keys;         /* nrt_keys/nrt_names filled from the device table */
	char nrt_keys[SB_DEVICE_N_ACCEL][640];  /* stable key of Device k+1, "" when absent */
	char nrt_names[SB_DEVICE_N_ACCEL][384];
	float nrt_progress, nrt_time_left;
	struct sb_instance *next;   /* service's list */
} sb_instance;

/* Consistent copy of the properties from any thread except the writer. */
void sb_props_read(sb_instance *self, sb_props *out);
/* Writer side (run() or restore()). */
SB_REALTIME void sb_props_write_begin(sb_instance *self);
SB_REALTIME void sb_props_write_end(sb_instance *self);
/* A modelFile value the engine can open by its path: len bytes without the NUL, either none
 * (len 0, which clears the property) or an absolute path ending in ".safetensors" with a
 * name before it, no NUL inside, short enough for sb_props. */
SB_REALTIME bool sb_model_file_valid(const char *s, size_t len);

/* service.c */
/* The service thread is started when an instance first needs it (armed, a UI listening, a
 * device chosen, an install asked for: run() schedules the start through the worker); never
 * in instantiate() or activate(), so that a host or a checker that instantiates a plugin only
 * to look at it starts no thread and waits for none. */
int sb_service_attach(sb_instance *self);   /* 0 on failure (logged); starts no thread */
int sb_service_start(sb_instance *self);    /* idempotent; 0 on failure (logged) */
void sb_service_detach(sb_instance *self);  /* cancels its jobs, frees its memory */

/* device_choice.c */
/* A saved device key the engine can resolve (any registered backend's). */
bool sb_device_key_valid(const char *k);
/* "auto", "cpu", "all" or "device:N" for a device port value. */
const char *sb_device_port_request(int port, char *buf, size_t len);
/* Stable key and readable name for a device port value, for state: from the instance's copy
 * of the device table once the service made it, so save() does not wait for the service. */
void sb_service_device_key(sb_instance *self, int port, char *key, size_t klen, char *name,
                           size_t nlen);

/* state.c */
extern const LV2_State_Interface sb_state_interface;

#endif
