/* The UI's logic, without X11 or LV2 atoms: what the device button cycles through, what each
 * label and tooltip says, and what state the plugin is in. Pure data in, strings out, so it is
 * tested without a display (tests/gui/test_ui_logic.c).
 *
 * Thread: all of it runs on the host's UI thread; nothing here blocks or allocates after
 * sbui_model_init().
 */
#ifndef SBUI_LOGIC_H
#define SBUI_LOGIC_H

#include <stdbool.h>
#include <stdint.h>

#define SBUI_MAX_DEVICES 8    /* matches SB_DEVICE_N_ACCEL in plugin/uris.h */
#define SBUI_MAX_STEMS   8
#define SBUI_TEXT        256
#define SBUI_LONG_TEXT   2048  /* messages that wrap in full: errors, notices */
#define SBUI_STEM_KINDS  6     /* vocals, drums, bass, other, guitar, piano (SB_PLUGIN_STEMS) */
#define SBUI_LANE_COLS   512   /* as SB_WAVE_COLS */
#define SBUI_VIEW_COLS   256   /* as SB_VIEW_COLS */

typedef struct {
	char key[SBUI_TEXT];
	char name[SBUI_TEXT];
	char platform[SBUI_TEXT];
	char type[SBUI_TEXT];
	int64_t memory_bytes;     /* -1 unknown */
	int compute_units;        /* -1 unknown */
	char driver[SBUI_TEXT];
} sbui_device;

typedef struct {
	char name[64];            /* "htdemucs", "auto", "builtin" */
	char title[64];           /* "HTDemucs", "Auto: HTDemucs" */
	unsigned stems;           /* bit s: canonical stem s (vocals, drums, bass, other, guitar, piano) */
	bool installed;
	int64_t bytes;            /* download size, 0 none */
} sbui_modelinfo;

#define SBUI_MAX_MODELS 12

typedef enum {
	SBUI_IDLE = 0, SBUI_RECORDING, SBUI_QUEUED, SBUI_SEPARATING, SBUI_DONE, SBUI_ERROR,
	SBUI_WRITING, /* separating at 100 %: stems are being written */
	SBUI_SILENT,  /* the last take was silent and not separated (the plugin says why) */
	SBUI_RESUMED  /* a take a stopped host left unfinished runs again from its recording */
} sbui_stage;

/* The take lane: the take being recorded or the last one (the plugin's takeWave). */
typedef struct {
	bool valid;
	int cols, per_col;         /* columns, frames per column */
	int64_t start, frames;     /* where the take starts, its length */
	float lohi[2 * SBUI_LANE_COLS]; /* min, max per column */
} sbui_lane;

/* One stem row's picture (stemViews), by canonical stem. */
typedef struct {
	bool valid;
	float peak, rms;           /* linear, the engine's */
	int cols;
	float lohi[2 * SBUI_VIEW_COLS];
} sbui_stem_view;

typedef struct {
	/* what the plugin told us */
	sbui_device devices[SBUI_MAX_DEVICES];
	int n_devices;
	bool devices_known;       /* the plugin sent its device list (possibly empty) */
	float device_port;        /* the chosen device, SB_DEVICE_* numbering */
	float state_port;         /* SB_STATE_* */
	float progress_port;      /* 0..1 */
	float time_left_port;     /* seconds until the separation is done; -1 not known */
	float device_out_port;    /* device in use; -1 none */
	float fallback_port;      /* 1 when the device in use is a fallback */
	char device_in_use[SBUI_TEXT]; /* the plugin's label, reason included */
	int64_t recorded_frames;
	double sample_rate;
	char stems[SBUI_MAX_STEMS][SBUI_TEXT];
	int n_stems;
	char last_error[SBUI_LONG_TEXT];
	char manifest[SBUI_TEXT];
	char model_notice[SBUI_LONG_TEXT]; /* the chosen model is not installed; "" it is */
	int job_take;              /* the take the state speaks of, 0 unknown */
	int queue_ahead;           /* takes ahead of it while queued */
	float audition_port;       /* SB_AUDITION_* */
	float ui_scale;            /* the window's own zoom, 0 none (uiScale) */
	sbui_lane lane;
	sbui_stem_view views[SBUI_STEM_KINDS];
	int64_t stems_start, stems_frames; /* the region of the stems (with the manifest) */
	/* models: the plugin's list, the Model control, the install in progress */
	sbui_modelinfo models[SBUI_MAX_MODELS];
	int n_models;
	float model_port;          /* SB_MODEL_* */
	char install_status[SBUI_TEXT];
	float install_fraction;    /* 0..1 */
} sbui_model;

void sbui_model_init(sbui_model* m, double sample_rate);

/* The number of entries the device button cycles through: Auto, CPU, each listed device.
 * A port value beyond the list (a preset from another machine) is shown as "not present";
 * stepping from it goes back into the list. Before the list arrives, only Auto and CPU. */
/* How many choices the Device button cycles through: Auto, CPU, each listed device, and All
 * devices once there is a device besides the CPU. */
int sbui_device_count(const sbui_model* m);
/* The port value after a click (dir +1) or a right-click / scroll down (dir -1); wraps. */
float sbui_device_step(const sbui_model* m, int dir);
/* "Auto", "CPU", "Device N: <its name>", "Device N" while the list is unknown, or
 * "Device N (not present)"; N counts from 1 as the plugin's enumeration does. */
void sbui_device_label(const sbui_model* m, float port_value, char* out, int size);
/* Multi-line details of the device a port value stands for. */
void sbui_device_tooltip(const sbui_model* m, float port_value, char* out, int size);

/* The device in use: its label and whether to draw it in the warning colour. */
void sbui_in_use_label(const sbui_model* m, char* out, int size, bool* warn);
/* The same split for drawing on two lines: the device ("CPU (2 threads)", "fallback" added when
 * it is one) and the reason in words, "" when the plugin gave none. */
void sbui_in_use_parts(const sbui_model* m, char* device, char* reason, int size, bool* warn);

sbui_stage sbui_model_stage(const sbui_model* m);
/* 0..1 for the progress bar. */
float sbui_progress(const sbui_model* m);

/* The Model button cycles Auto, Built-in, HTDemucs, HTDemucs fine-tuned, HTDemucs 6 stems. */
float sbui_model_step(float port_value, int dir);
/* "Auto: HTDemucs", "Built-in", "HTDemucs", "HTDemucs 6 stems (not installed)" */
void sbui_model_label(const sbui_model* m, float port_value, char* out, int size);
/* The model a Model control value stands for in the plugin's list (NULL before it came). */
const sbui_modelinfo* sbui_model_info(const sbui_model* m, float port_value);
/* The model to offer an Install button for: the chosen one when it is not installed and no
 * install of it runs. Its name into out; false when there is none. */
bool sbui_model_install_offer(const sbui_model* m, char* out, int size, int64_t* bytes);
/* Whether the chosen model makes canonical stem s (guitar and piano: six-stem models only);
 * true while unknown. */
bool sbui_model_makes(const sbui_model* m, int stem);
/* An install runs (its status says what it is doing). */
bool sbui_installing(const sbui_model* m);
/* The plugin's modelList text (lines: name, title, stems, installed, bytes, tab-separated) and
 * installStatus text ("fraction<TAB>words"). */
void sbui_set_model_list(sbui_model* m, const char* text);
void sbui_set_install_status(sbui_model* m, const char* text);

/* Setters the LV2 glue calls from port_event. A state port entering "recording" restarts the
 * recording clock. sbui_clear_devices marks the list as known. */
void sbui_set_port(sbui_model* m, uint32_t port, float value);
void sbui_clear_devices(sbui_model* m);
bool sbui_add_device(sbui_model* m, const sbui_device* d);
/* The Time left output (its index differs between the mono and stereo plugins). */
void sbui_set_time_left(sbui_model* m, float seconds);
void sbui_clear_stems(sbui_model* m);
bool sbui_add_stem(sbui_model* m, const char* path);

/* The canonical stem (0 vocals .. 5 piano) a stem file is, from its name ("...-vocals.wav");
 * -1 when none. */
int sbui_stem_of_path(const char* path);
/* N of the take folder "<track>-take<N>" a stem or manifest path lies in; 0 when none. */
int sbui_take_of_path(const char* path);
/* The take the stems on show belong to (from their folder), 0 none. */
int sbui_stems_take(const sbui_model* m);

/* Audition: the value the control takes after a click on S (solo: this stem alone) or M (mute:
 * the mix without it) of stem s; a click on the one playing turns it off. One at a time. */
float sbui_audition_click(float current, int stem, bool mute);
/* Whether S (mute false) or M (mute true) of stem s is the one playing. */
bool sbui_audition_is(float current, int stem, bool mute);
/* The lane's loudest |sample| so far, 0 for none. */
float sbui_lane_peak(const sbui_lane* l);
void sbui_set_text(char* dst, const char* src, int len); /* len may be -1: NUL-terminated */
/* The same into a buffer of cap bytes (a message that wraps: SBUI_LONG_TEXT). */
void sbui_set_text_n(char* dst, int cap, const char* src, int len);

#endif
