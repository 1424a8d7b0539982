/* A small LV2 test host on lilv: loads the plugins from the build dir (LV2_PATH), provides
 * urid:map/unmap, log, makePath and mapPath, feeds audio with time:Position events and reads
 * the notify port. Used by the plugin tests; see test_plugin.c. */
#ifndef SB_TEST_HOST_H
#define SB_TEST_HOST_H

#include <lilv/lilv.h>
#include <lv2/atom/atom.h>
#include <lv2/urid/urid.h>

#include <stdbool.h>
#include <stdint.h>

typedef enum { HOST_PATH_NONE = 0, HOST_PATH_ARDOUR, HOST_PATH_CARLA } host_path_mode;

typedef struct {
	LilvInstance *inst;
	const LilvPlugin *plugin;
	int channels;
	uint32_t n_ports;
	float ctl[32];
	uint8_t *control_buf, *notify_buf;
	float *in[2], *out[2];
	uint32_t block;
	int64_t pos;             /* host transport */
	float speed;
	bool send_pos;           /* send time:Position in the next run */
	float freewheel;
	/* what the plugin announced */
	char manifest[4096];
	char device_in_use[1024];
	char last_error[1024];
	char model_file[4096];   /* the modelFile property as last announced */
	char model_list[4096];   /* the modelList property as last announced */
	char install_status[1024]; /* the installStatus property as last announced */
	int64_t timeline_start;
	char scratch[1024];      /* makePath root */
	host_path_mode path_mode;
	bool listening;          /* sent patch:Get, as a UI does */
	int other_sets;          /* messages about properties a UI asks for (not the manifest's) */
	int sets_not_writable;   /* patch:Set of a property that is not patch:writable */
	char output_dir[4096];   /* the outputDir property as last announced */
	/* work:schedule: one message kept until host_do_work() (after each run unless hold_work) */
	uint8_t work_msg[64];
	uint32_t work_size;
	int work_pending, works_done;
	bool hold_work;
	char stems[8][1024];     /* the last stems tuple */
	int n_stems;
	int n_device_list;       /* devices in the last deviceList, -1 before one came */
	char model_notice[1024]; /* the modelNotice property as last announced */
	int job_take, queue_ahead; /* jobTake, queueAhead as last announced (-1 before) */
	/* the take lane as last announced: min, max per column */
	float wave[2 * 1024];
	int wave_cols, wave_per_col, waves_seen;
	int64_t wave_start, wave_frames;
	/* the stem rows as last announced */
	int n_views, views_seen;
	struct {
		int stem;
		float peak, rms;
		int cols;
		float wave[2 * 512];
	} views[8];
	float ui_scale;          /* the uiScale property as last announced */
} host_plugin;

void host_init(void);
void host_fini(void);
LV2_URID host_map(const char *uri);
const char *host_unmap(LV2_URID u);
int host_log_warnings(void);
/* Whether the plugin's log said 'text' (a substring of any line so far). */
bool host_log_has(const char *text);
LV2_URID_Map *host_map_feature(void);
LV2_URID_Unmap *host_unmap_feature(void);

/* A plugin instance with a UI's manners: it sends patch:Get first, as the UI does when it opens.
 * host_new_quiet() does not, as Ardour without the UI open. */
host_plugin *host_new(bool stereo, uint32_t block, host_path_mode mode, const char *scratch);
host_plugin *host_new_quiet(bool stereo, uint32_t block, host_path_mode mode, const char *scratch);
/* Queues a patch:Get for the next run. */
void host_get(host_plugin *h);
void host_free(host_plugin *h);
/* Runs one block: input from in[], output to out[]; sends Position if send_pos. */
void host_run(host_plugin *h);
/* Sends a patch:Set with the given value atom type (Path/String/Float) in the next run. */
void host_set_text(host_plugin *h, const char *prop, const char *type, const char *text);
void host_set_float(host_plugin *h, const char *prop, float v);
/* The same with any value atom, its body given as is (size bytes, no NUL added): for damage. */
void host_set_atom(host_plugin *h, const char *prop, const char *type, const void *body,
                   uint32_t size);
void host_transport(host_plugin *h, int64_t pos, float speed);
/* Runs silence-free idle blocks (transport stopped) until jobs_done reaches n; 0 on timeout. */
int host_wait_jobs(host_plugin *h, int n, double timeout_s);
void host_sleep_ms(int ms);
double host_now(void);

extern LilvWorld *host_world;
extern int host_no_worker;   /* instantiate without work:schedule (as lv2apply) */
/* Runs the plugin's work() for the message it scheduled, if any. */
void host_do_work(host_plugin *h);
extern const LV2_Feature *const *host_features;

/* rt_trap.c: counts allocations, locks and file I/O made on the thread inside run(). */
void rt_trap_enter(void);
void rt_trap_leave(void);
long rt_trap_count(void);
const char *rt_trap_last(void);

#endif
