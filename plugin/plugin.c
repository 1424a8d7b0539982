/* The Stembridge LV2 plugins (mono and stereo): real-time side.
 *
 * run() reads like eg-sampler's: walk the control events (time:Position, patch:Set/Get),
 * render the audio between them, hand anything slow to the plugin service thread
 * (service.c) through lock-free rings and never wait for it. Audio passes through unchanged
 * with no latency, except while auditioning a take's stems inside that take's region.
 */
#include "instance.h"

#include <lv2/atom/util.h>
#include <lv2/core/lv2.h>
#include <lv2/core/lv2_util.h>
#include <lv2/patch/patch.h>
#include <lv2/time/time.h>

#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_uint instance_counter;

static void map_urids(LV2_URID_Map *map, sb_urids *u)
{
	u->atom_Blank = map->map(map->handle, LV2_ATOM__Blank);
	u->atom_Object = map->map(map->handle, LV2_ATOM__Object);
	u->atom_Path = map->map(map->handle, LV2_ATOM__Path);
	u->atom_String = map->map(map->handle, LV2_ATOM__String);
	u->atom_Float = map->map(map->handle, LV2_ATOM__Float);
	u->atom_Long = map->map(map->handle, LV2_ATOM__Long);
	u->atom_Int = map->map(map->handle, LV2_ATOM__Int);
	u->atom_Double = map->map(map->handle, LV2_ATOM__Double);
	u->atom_Bool = map->map(map->handle, LV2_ATOM__Bool);
	u->atom_URID = map->map(map->handle, LV2_ATOM__URID);
	u->atom_Sequence = map->map(map->handle, LV2_ATOM__Sequence);
	u->atom_Tuple = map->map(map->handle, LV2_ATOM__Tuple);
	u->atom_eventTransfer = map->map(map->handle, LV2_ATOM__eventTransfer);
	u->time_Position = map->map(map->handle, LV2_TIME__Position);
	u->time_frame = map->map(map->handle, LV2_TIME__frame);
	u->time_speed = map->map(map->handle, LV2_TIME__speed);
	u->patch_Set = map->map(map->handle, LV2_PATCH__Set);
	u->patch_Get = map->map(map->handle, LV2_PATCH__Get);
	u->patch_Put = map->map(map->handle, LV2_PATCH__Put);
	u->patch_body = map->map(map->handle, LV2_PATCH__body);
	u->patch_property = map->map(map->handle, LV2_PATCH__property);
	u->patch_value = map->map(map->handle, LV2_PATCH__value);
	u->patch_subject = map->map(map->handle, LV2_PATCH__subject);
	u->sb_outputDir = map->map(map->handle, SB__outputDir);
	u->sb_modelFile = map->map(map->handle, SB__modelFile);
	u->sb_manifest = map->map(map->handle, SB__manifest);
	u->sb_deviceKey = map->map(map->handle, SB__deviceKey);
	u->sb_deviceName = map->map(map->handle, SB__deviceName);
	u->sb_deviceInUse = map->map(map->handle, SB__deviceInUse);
	u->sb_lastError = map->map(map->handle, SB__lastError);
	u->sb_recordedFrames = map->map(map->handle, SB__recordedFrames);
	u->sb_timelineStart = map->map(map->handle, SB__timelineStart);
	u->sb_maxMinutes = map->map(map->handle, SB__maxMinutes);
	u->sb_trackName = map->map(map->handle, SB__trackName);
	u->sb_devicePort = map->map(map->handle, SB__devicePort);
	u->sb_mode = map->map(map->handle, SB__mode);
	u->sb_model = map->map(map->handle, SB__model);
	u->sb_stemMask = map->map(map->handle, SB__stemMask);
	u->sb_precision = map->map(map->handle, SB__precision);
	u->sb_keepTake = map->map(map->handle, SB__keepTake);
	u->sb_stems = map->map(map->handle, SB__stems);
	u->sb_deviceList = map->map(map->handle, SB__deviceList);
	u->sb_devicePlatform = map->map(map->handle, SB__devicePlatform);
	u->sb_deviceType = map->map(map->handle, SB__deviceType);
	u->sb_deviceMemory = map->map(map->handle, SB__deviceMemory);
	u->sb_deviceUnits = map->map(map->handle, SB__deviceUnits);
	u->sb_deviceDriver = map->map(map->handle, SB__deviceDriver);
	u->sb_modelList = map->map(map->handle, SB__modelList);
	u->sb_installModel = map->map(map->handle, SB__installModel);
	u->sb_installStatus = map->map(map->handle, SB__installStatus);
	u->sb_instanceId = map->map(map->handle, SB__instanceId);
	u->sb_lastTake = map->map(map->handle, SB__lastTake);
	u->sb_uiScale = map->map(map->handle, SB__uiScale);
	u->sb_modelNotice = map->map(map->handle, SB__modelNotice);
	u->sb_jobTake = map->map(map->handle, SB__jobTake);
	u->sb_queueAhead = map->map(map->handle, SB__queueAhead);
	u->sb_takeWave = map->map(map->handle, SB__takeWave);
	u->sb_takeWaveFrames = map->map(map->handle, SB__takeWaveFrames);
	u->sb_takeStart = map->map(map->handle, SB__takeStart);
	u->sb_takeFrames = map->map(map->handle, SB__takeFrames);
	u->sb_stemViews = map->map(map->handle, SB__stemViews);
	u->sb_stemIndex = map->map(map->handle, SB__stemIndex);
	u->sb_stemPeak = map->map(map->handle, SB__stemPeak);
	u->sb_stemRms = map->map(map->handle, SB__stemRms);
	u->sb_stemWave = map->map(map->handle, SB__stemWave);
}

SB_REALTIME void sb_props_write_begin(sb_instance *self)
{
	atomic_fetch_add_explicit(&self->props_seq, 1, memory_order_acq_rel);
}

SB_REALTIME void sb_props_write_end(sb_instance *self)
{
	atomic_fetch_add_explicit(&self->props_seq, 1, memory_order_release);
}

SB_REALTIME bool sb_model_file_valid(const char *s, size_t len)
{
	static const char ext[] = ".safetensors";
	const size_t k = sizeof ext - 1;
	if (len == 0)
		return true;
	return len < SB_TEXT && s[0] == '/' && len > k + 1 && s[len - k - 1] != '/' &&
	       memcmp(s + len - k, ext, k) == 0 && !memchr(s, '\0', len);
}

void sb_props_read(sb_instance *self, sb_props *out)
{
	for (;;) {
		unsigned s1 = atomic_load_explicit(&self->props_seq, memory_order_acquire);
		if (s1 & 1u)
			continue;
		memcpy(out, &self->props, sizeof *out);
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&self->props_seq, memory_order_relaxed) == s1)
			return;
	}
}

/* Six hex digits that name this instance's stems while no trackName is set; saved with the
 * state, so a reopened session names its takes as before. */
static void new_instance_id(sb_instance *self)
{
	unsigned char b[3] = {0, 0, 0};
	int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	bool got = fd >= 0 && read(fd, b, sizeof b) == (ssize_t)sizeof b;
	if (fd >= 0)
		close(fd);
	if (!got) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		unsigned x = (unsigned)ts.tv_nsec ^ ((unsigned)getpid() << 8) ^ (self->serial * 2654435761u);
		b[0] = (unsigned char)x;
		b[1] = (unsigned char)(x >> 8);
		b[2] = (unsigned char)(x >> 16);
	}
	snprintf(self->nrt_id, sizeof self->nrt_id, "%02x%02x%02x", b[0], b[1], b[2]);
}

static LV2_Handle instantiate(const LV2_Descriptor *d, double rate, const char *bundle,
                              const LV2_Feature *const *features)
{
	(void)bundle;
	sb_instance *self = calloc(1, sizeof *self);
	if (!self)
		return NULL;
	const char *missing = lv2_features_query(features,
		LV2_LOG__log, &self->logger.log, false,
		LV2_URID__map, &self->map, true,
		LV2_STATE__makePath, &self->make_path, false,
		LV2_STATE__freePath, &self->free_path, false,
		LV2_WORKER__schedule, &self->schedule, true,
		NULL);
	lv2_log_logger_set_map(&self->logger, self->map);
	if (missing) {
		lv2_log_error(&self->logger, "stembridge: host lacks required feature <%s>\n", missing);
		free(self);
		return NULL;
	}
	self->rate = rate;
	self->channels = strcmp(d->URI, SB_URI_STEREO) == 0 ? 2 : 1;
	self->serial = atomic_fetch_add(&instance_counter, 1) + 1;
	new_instance_id(self);
	map_urids(self->map, &self->u);
	lv2_atom_forge_init(&self->forge, self->map);
	lv2_atom_forge_init(&self->nrt_forge, self->map);
	atomic_init(&self->device_list, NULL);
	pthread_mutex_init(&self->nrt_lock, NULL);
	self->props.max_minutes = 30.0f;
	self->nrt_device_port = -1;
	self->rt_device = -1;
	self->nrt_dev = -1;
	self->rt_time_left = self->nrt_time_left = -1.0f;
	self->nrt_model_port = -1;
	sb_wave_reset(&self->rt_wave);
	self->rt_job_take_sent = self->rt_ahead_sent = -1;
	atomic_init(&self->model_port, -1);
	atomic_init(&self->keep_take, 0);
	atomic_init(&self->resume_scan, 0);
	atomic_init(&self->audition_pending, NULL);
	atomic_init(&self->audition_retired, NULL);
	if (!sb_ring_init(&self->free_blocks, 1024, sizeof(sb_block *)) ||
	    !sb_ring_init(&self->free_takes, 8, sizeof(sb_take *)) ||
	    !sb_ring_init(&self->finished, 8, sizeof(sb_take *)) ||
	    !sb_ring_init(&self->status, 32, sizeof(sb_msg)) ||
	    !sb_ring_init(&self->requests, 8, sizeof(sb_request))) {
		lv2_log_error(&self->logger, "stembridge: out of memory\n");
		goto fail;
	}
	for (int i = 0; i < SB_TAKES; i++) {
		sb_take *t = &self->takes[i];
		sb_ring_push(&self->free_takes, &t);
	}
	if (!sb_service_attach(self))
		goto fail;
	return self;
fail:
	sb_ring_free(&self->free_blocks);
	sb_ring_free(&self->free_takes);
	sb_ring_free(&self->finished);
	sb_ring_free(&self->status);
	sb_ring_free(&self->requests);
	pthread_mutex_destroy(&self->nrt_lock);
	free(self);
	return NULL;
}

static void connect_port(LV2_Handle h, uint32_t port, void *data)
{
	sb_instance *self = h;
	if (port == SB_PORT_CONTROL) {
		self->control = data;
	} else if (port == SB_PORT_NOTIFY) {
		self->notify = data;
	} else if (port <= SB_PORT_AUDITION) {
		self->ctl[port] = data;
	} else if (port == SB_PORT_STATE_OUT) {
		self->out_state = data;
	} else if (port == SB_PORT_PROGRESS_OUT) {
		self->out_progress = data;
	} else if (port == SB_PORT_DEVICE_OUT) {
		self->out_device = data;
	} else if (port == SB_PORT_FALLBACK_OUT) {
		self->out_fallback = data;
	} else if (port == SB_PORT_JOBS_DONE_OUT) {
		self->out_jobs = data;
	} else if (port < SB_PORT_AUDIO_IN_1 + 2u * (unsigned)self->channels) {
		/* the inputs, then the outputs: mono in, out; stereo in L, in R, out L, out R */
		const unsigned a = port - SB_PORT_AUDIO_IN_1, ch = (unsigned)self->channels;
		if (a < ch)
			self->in[a] = data;
		else
			self->out[a - ch] = data;
	} else if (port == sb_port_freewheel(self->channels)) {
		self->freewheel = data;
	} else if (port == sb_port_stem(self->channels, 4) ||
	           port == sb_port_stem(self->channels, 5)) {
		self->ctl_stem_extra[port - sb_port_stem(self->channels, 4)] = data;
	} else if (port == sb_port_time_left(self->channels)) {
		self->out_time_left = data;
	} else if (port == sb_port_precision(self->channels)) {
		self->ctl_precision = data;
	} else if (port == sb_port_keep_take(self->channels)) {
		self->ctl_keep_take = data;
	}
}

SB_REALTIME static float ctl(const sb_instance *self, int port, float dflt)
{
	return self->ctl[port] ? *self->ctl[port] : dflt;
}

/* An enumeration or integer port: hosts send floats, 1.9999 means 2. */
SB_REALTIME static int ctl_int(const sb_instance *self, int port, int dflt)
{
	return self->ctl[port] ? (int)lrintf(*self->ctl[port]) : dflt;
}

/* Ends the take in progress and hands it to the service. */
SB_REALTIME static void take_finish(sb_instance *self)
{
	if (!self->rt_recording)
		return;
	sb_take *t = self->rt_take;
	if (self->rt_block) {
		if (t->last)
			t->last->next = self->rt_block;
		else
			t->first = self->rt_block;
		t->last = self->rt_block;
		self->rt_block = NULL;
	}
	/* The finished ring holds every take descriptor, so this cannot fail. */
	sb_ring_push(&self->finished, &t);
	self->rt_announce_wave = true; /* the take lane's last picture of it */
	/* until the service says more, the take waits its turn: the state shows no stale Error or
	 * Done of the take before */
	if (t->frames > 0) {
		self->rt_state = SB_STATE_QUEUED;
		self->rt_progress = 0.0f;
		self->rt_time_left = -1.0f;
		self->rt_job_take = self->rt_ahead = 0;
	}
	self->rt_take = NULL;
	self->rt_recording = false;
}

SB_REALTIME static void take_start(sb_instance *self)
{
	sb_take *t;
	if (!sb_ring_pop(&self->free_takes, &t)) {
		/* four takes still being handed over: the service is behind (logged there) */
		atomic_store_explicit(&self->no_take_alarm, 1, memory_order_relaxed);
		return;
	}
	t->first = t->last = NULL;
	t->frames = 0;
	t->lost = 0;
	t->peak = 0.0f;
	t->timeline_start = self->rt_pos;
	t->device_port = ctl_int(self, SB_PORT_DEVICE, 0);
	t->mode = ctl_int(self, SB_PORT_MODE, 0);
	t->model = ctl_int(self, SB_PORT_MODEL, SB_MODEL_AUTO);
	t->bf16 = self->ctl_precision && *self->ctl_precision > 0.5f;
	t->stems = 0;
	for (int s = 0; s < 4; s++)
		if (ctl(self, SB_PORT_STEM_VOCALS + s, 1.0f) > 0.5f)
			t->stems |= 1u << s;
	for (int s = 0; s < 2; s++) /* guitar, piano: on unless the host says off */
		if (!self->ctl_stem_extra[s] || *self->ctl_stem_extra[s] > 0.5f)
			t->stems |= 1u << (4 + s);
	t->serial = ++self->rt_take_serial;
	self->rt_take = t;
	self->rt_recording = true;
	self->rt_reported_frames = 0;
	/* a new take: its lane starts empty, and the last take's error is no longer news */
	sb_wave_reset(&self->rt_wave);
	self->rt_wave_start = t->timeline_start;
	self->rt_wave_frames = self->rt_wave_sent = 0;
	self->rt_wave_valid = self->rt_announce_wave = true;
	self->rt_error[0] = '\0';
	self->rt_announce_error = true;
}

/* Freewheeling (lv2:freeWheeling: an export or offline bounce) runs run() faster than real
 * time, with no real-time deadline, and must lose no sample. The service deepens the pool as
 * soon as it sees the flag (SB_POOL_FREEWHEEL blocks, about 3 minutes), so this is reached only
 * when a bounce outruns it; then, and only then, run() waits for the service, boundedly. It is
 * never reached while playing in real time: there a dry pool loses samples and says so. */
static bool freewheel_wait_block(sb_instance *self)
{
	if (!self->freewheel || *self->freewheel <= 0.5f)
		return false;
	for (int i = 0; i < 20000; i++) { /* at most about 2 s */
		const struct timespec ts = {0, 100000};
		nanosleep(&ts, NULL);
		if (sb_ring_pop(&self->free_blocks, &self->rt_block))
			return true;
	}
	return false;
}

SB_REALTIME static void take_append(sb_instance *self, uint32_t from, uint32_t n)
{
	sb_take *t = self->rt_take;
	const int ch = self->channels;
	const int64_t limit = (int64_t)(self->props.max_minutes * 60.0 * self->rate);
	while (n > 0) {
		if (t->frames >= limit) {
			take_finish(self);
			self->rt_limit_hit = true;
			return;
		}
		if (!self->rt_block) {
			if (!sb_ring_pop(&self->free_blocks, &self->rt_block) &&
			    !freewheel_wait_block(self)) {
				t->lost += n;
				atomic_store_explicit(&self->lost_frames_alarm, 1, memory_order_relaxed);
				return;
			}
			self->rt_block->used = 0;
			self->rt_block->next = NULL;
		}
		sb_block *b = self->rt_block;
		uint32_t room = SB_BLOCK_FRAMES - b->used;
		uint32_t k = n < room ? n : room;
		if ((int64_t)k > limit - t->frames)
			k = (uint32_t)(limit - t->frames);
		float *dst = b->data + (size_t)b->used * ch;
		float peak = t->peak;
		for (uint32_t i = 0; i < k; i++)
			for (int c = 0; c < ch; c++) {
				const float v = self->in[c] ? self->in[c][from + i] : 0.0f;
				dst[(size_t)i * ch + c] = v;
				/* NaN compares false: a NaN input is caught by the engine, not here */
				peak = fabsf(v) > peak ? fabsf(v) : peak;
			}
		t->peak = peak;
		sb_wave_add(&self->rt_wave, self->in, ch, from, k);
		b->used += k;
		t->frames += k;
		self->rt_wave_frames = t->frames;
		from += k;
		n -= k;
		if (b->used == SB_BLOCK_FRAMES) {
			if (t->last)
				t->last->next = b;
			else
				t->first = b;
			t->last = b;
			self->rt_block = NULL;
		}
	}
}

/* Renders frames [from, to): record, pass through or audition, advance the transport. */
SB_REALTIME static void render(sb_instance *self, uint32_t from, uint32_t to)
{
	if (to <= from)
		return;
	const uint32_t n = to - from;
	const bool rolling = self->rt_have_pos && self->rt_speed != 0.0f;
	if (self->rt_recording)
		take_append(self, from, n);

	const sb_audition *a = self->rt_audition;
	int without = 0;
	const int sel = sb_audition_stem(ctl_int(self, SB_PORT_AUDITION, 0), &without);
	const bool audition = a && a->held && rolling && sel >= 0 && a->channels == self->channels &&
	                      (without || a->stem[sel]) && self->rt_pos + n > a->start &&
	                      self->rt_pos < a->start + a->frames;
	for (int c = 0; c < self->channels; c++) {
		if (!self->out[c])
			continue;
		if (!self->in[c])
			memset(self->out[c] + from, 0, n * sizeof(float));
		else if (self->out[c] != self->in[c])
			memcpy(self->out[c] + from, self->in[c] + from, n * sizeof(float));
		if (!audition)
			continue;
		for (uint32_t i = 0; i < n; i++) {
			int64_t f = self->rt_pos + i - a->start;
			if (f < 0 || f >= a->frames)
				continue;
			size_t at = (size_t)f * a->channels + c;
			float v = 0.0f;
			if (!without) {
				v = a->stem[sel][at];
			} else {
				for (int s = 0; s < SB_PLUGIN_STEMS; s++)
					if (s != sel && a->stem[s])
						v += a->stem[s][at];
			}
			self->out[c][from + i] = v;
		}
	}
	if (rolling)
		self->rt_pos += n;
}

SB_REALTIME static void handle_position(sb_instance *self, const LV2_Atom_Object *obj)
{
	const LV2_Atom *frame = NULL, *speed = NULL;
	lv2_atom_object_get(obj, self->u.time_frame, &frame, self->u.time_speed, &speed, 0);
	int64_t new_pos = self->rt_pos;
	float new_speed = self->rt_speed;
	if (frame && frame->type == self->u.atom_Long)
		new_pos = ((const LV2_Atom_Long *)frame)->body;
	if (speed && speed->type == self->u.atom_Float)
		new_speed = ((const LV2_Atom_Float *)speed)->body;
	/* A stop or a jump ends the take: the region must be contiguous on the timeline. */
	if (self->rt_recording && (new_speed == 0.0f || new_pos != self->rt_pos))
		take_finish(self);
	if (new_speed == 0.0f)
		self->rt_limit_hit = false;
	self->rt_pos = new_pos;
	self->rt_speed = new_speed;
	self->rt_have_pos = true;
}

/* The length of a string atom's text: the bytes before its terminating NUL, which may be
 * followed by more NULs only (Carla 2.5 forges a path with strlen + 1 as its length, so its
 * atoms end in two). -1 when there is no NUL, or something follows one (damage). */
SB_REALTIME static int64_t atom_text_len(const LV2_Atom *v)
{
	const char *s = (const char *)LV2_ATOM_BODY_CONST(v);
	const size_t len = strnlen(s, v->size);
	if (len == v->size)
		return -1;
	for (size_t i = len + 1; i < v->size; i++)
		if (s[i] != '\0')
			return -1;
	return (int64_t)len;
}

SB_REALTIME static bool atom_text(const LV2_Atom *v, char *dst, size_t cap)
{
	const int64_t len = v->size ? atom_text_len(v) : -1;
	if (len < 0 || (size_t)len >= cap)
		return false;
	memcpy(dst, LV2_ATOM_BODY_CONST(v), (size_t)len);
	dst[len] = '\0';
	return true;
}

/* A value's last path component has an extension ("song.wav"): a file, not a folder. */
SB_REALTIME static bool names_a_file(const char *s, size_t len)
{
	size_t i = len;
	while (i > 0 && s[i - 1] != '/')
		i--;
	const char *dot = memchr(s + i, '.', len - i);
	return dot && dot > s + i && dot < s + len - 1;
}

SB_REALTIME static bool ends_with(const char *s, size_t len, const char *tail)
{
	const size_t k = strlen(tail);
	return len >= k && memcmp(s + len - k, tail, k) == 0;
}

/* patch:Set outputDir or modelFile. Generic host UIs reach these through file dialogs that
 * pick existing files only (Ardour's file buttons, ui:requestValue) and Carla offers one file
 * slot for the plugin, on whichever path property it lists first (modelFile): so either
 * property takes either meaning. A converted model (.safetensors) sets the model file; any other
 * file stands for its folder, and a folder is the output folder. "" clears the property set.
 * Damage (not a path, relative, no NUL, too long, a PyTorch checkpoint) changes nothing and is
 * logged by the service. No I/O here: a file without an extension is told from a folder when
 * the folder is used (take_folder.c). */
SB_REALTIME static void set_path(sb_instance *self, LV2_URID key, const LV2_Atom *value)
{
	const char *body = (const char *)LV2_ATOM_BODY_CONST(value);
	const int64_t tl = value->type == self->u.atom_Path && value->size > 0 ? atom_text_len(value)
	                                                                      : -1;
	const bool text = tl >= 0;
	const size_t len = text ? (size_t)tl : 0;
	if (text && len == 0) {
		if (key == self->u.sb_outputDir)
			self->props.output_dir[0] = '\0';
		else
			self->props.model_file[0] = '\0';
		return;
	}
	static const char *const checkpoints[] = {".th", ".pt", ".pth", ".ckpt", ".yaml", ".onnx"};
	bool checkpoint = false;
	for (size_t i = 0; text && i < sizeof checkpoints / sizeof checkpoints[0]; i++)
		checkpoint = checkpoint || ends_with(body, len, checkpoints[i]);
	if (!text || body[0] != '/' || len >= SB_TEXT || checkpoint) {
		atomic_store_explicit(&self->bad_path_alarm, key == self->u.sb_modelFile ? 1 : 2,
		                      memory_order_relaxed);
		return;
	}
	if (ends_with(body, len, ".safetensors")) {
		if (sb_model_file_valid(body, len))
			memcpy(self->props.model_file, body, len + 1);
		else
			atomic_store_explicit(&self->bad_path_alarm, 1, memory_order_relaxed);
		return;
	}
	size_t n = len;
	if (names_a_file(body, len))
		while (n > 1 && body[n - 1] != '/')
			n--;
	while (n > 1 && body[n - 1] == '/')
		n--;
	memcpy(self->props.output_dir, body, n);
	self->props.output_dir[n] = '\0';
	if (key == self->u.sb_modelFile)
		atomic_store_explicit(&self->folder_from_model_slot, 1, memory_order_relaxed);
}

SB_REALTIME static void handle_set(sb_instance *self, const LV2_Atom_Object *obj)
{
	const LV2_Atom *prop = NULL, *value = NULL;
	lv2_atom_object_get(obj, self->u.patch_property, &prop, self->u.patch_value, &value, 0);
	if (!prop || prop->type != self->u.atom_URID || !value)
		return;
	const LV2_URID key = ((const LV2_Atom_URID *)prop)->body;
	sb_props_write_begin(self);
	if (key == self->u.sb_outputDir || key == self->u.sb_modelFile) {
		set_path(self, key, value);
	} else if (key == self->u.sb_trackName && value->type == self->u.atom_String) {
		if (!atom_text(value, self->props.track, sizeof self->props.track))
			self->props.track[0] = '\0';
	} else if (key == self->u.sb_maxMinutes && value->type == self->u.atom_Float) {
		float m = ((const LV2_Atom_Float *)value)->body;
		if (m >= 0.1f && m <= 240.0f)
			self->props.max_minutes = m;
	} else if (key == self->u.sb_uiScale && value->type == self->u.atom_Float) {
		const float z = ((const LV2_Atom_Float *)value)->body;
		if (z == 0.0f || (z >= SB_UI_SCALE_MIN && z <= SB_UI_SCALE_MAX))
			self->props.ui_scale = z;
	} else if (key == self->u.sb_installModel && value->type == self->u.atom_String) {
		/* the service downloads and installs it, off this thread */
		sb_request r;
		if (atom_text(value, r.install, sizeof r.install))
			sb_ring_push(&self->requests, &r);
		sb_props_write_end(self);
		return;
	}
	sb_props_write_end(self);
	self->rt_announce_props = true;
}

/* Bytes left in the notify buffer. Each message checks it first: a message cut short by a full
 * buffer would be a malformed object for the reader. */
SB_REALTIME static uint32_t notify_room(const sb_instance *self)
{
	return self->forge.size > self->forge.offset ? self->forge.size - self->forge.offset : 0;
}

/* Event header and message object up to the value: for a writable property
 * [patch:Set; patch:property P; patch:value ...], for a read-only one
 * [patch:Put; patch:body [P ...]] (Ardour 7.3 keeps patch:Set for writable properties only and
 * warns about every other one; it passes patch:Put to the UI without a word). */
#define SB_MSG_OVERHEAD 96u

typedef struct {
	LV2_Atom_Forge_Frame msg, body;
	bool put;
} msg_frames;

SB_REALTIME static bool is_writable(const sb_instance *self, LV2_URID key)
{
	const sb_urids *u = &self->u;
	return key == u->sb_outputDir || key == u->sb_modelFile || key == u->sb_trackName ||
	       key == u->sb_maxMinutes || key == u->sb_uiScale;
}

/* False, and nothing written, when the notify port has no room for the message with a value
 * of value_room bytes. */
SB_REALTIME static bool msg_head(sb_instance *self, msg_frames *fr, LV2_URID key,
                                 uint32_t value_room)
{
	if (notify_room(self) < SB_MSG_OVERHEAD + value_room)
		return false;
	fr->put = !is_writable(self, key);
	lv2_atom_forge_frame_time(&self->forge, 0);
	if (fr->put) {
		lv2_atom_forge_object(&self->forge, &fr->msg, 0, self->u.patch_Put);
		lv2_atom_forge_key(&self->forge, self->u.patch_body);
		lv2_atom_forge_object(&self->forge, &fr->body, 0, 0);
		lv2_atom_forge_key(&self->forge, key);
	} else {
		lv2_atom_forge_object(&self->forge, &fr->msg, 0, self->u.patch_Set);
		lv2_atom_forge_key(&self->forge, self->u.patch_property);
		lv2_atom_forge_urid(&self->forge, key);
		lv2_atom_forge_key(&self->forge, self->u.patch_value);
	}
	return true;
}

SB_REALTIME static void msg_end(sb_instance *self, msg_frames *fr)
{
	if (fr->put)
		lv2_atom_forge_pop(&self->forge, &fr->body);
	lv2_atom_forge_pop(&self->forge, &fr->msg);
}

SB_REALTIME static void forge_set_text(sb_instance *self, LV2_URID key, LV2_URID type,
                                       const char *text)
{
	const uint32_t len = (uint32_t)strnlen(text, SB_TEXT - 1);
	msg_frames fr;
	if (!msg_head(self, &fr, key, len + 16))
		return;
	lv2_atom_forge_typed_string(&self->forge, type, text, len);
	msg_end(self, &fr);
}

SB_REALTIME static void forge_set_long(sb_instance *self, LV2_URID key, int64_t v)
{
	msg_frames fr;
	if (!msg_head(self, &fr, key, 16))
		return;
	lv2_atom_forge_long(&self->forge, v);
	msg_end(self, &fr);
}

SB_REALTIME static void forge_set_float(sb_instance *self, LV2_URID key, float v)
{
	msg_frames fr;
	if (!msg_head(self, &fr, key, 16))
		return;
	lv2_atom_forge_float(&self->forge, v);
	msg_end(self, &fr);
}

/* stems: a tuple of paths from the service's one-per-line text. */
SB_REALTIME static void forge_set_stems(sb_instance *self, const char *lines)
{
	const uint32_t len = (uint32_t)strnlen(lines, SB_TEXT - 1);
	msg_frames fr;
	LV2_Atom_Forge_Frame tup;
	if (!msg_head(self, &fr, self->u.sb_stems, len + 16 * 9))
		return;
	lv2_atom_forge_tuple(&self->forge, &tup);
	for (const char *p = lines; *p;) {
		const char *e = strchr(p, '\n');
		const uint32_t n = (uint32_t)(e ? (size_t)(e - p) : strlen(p));
		if (n > 0)
			lv2_atom_forge_path(&self->forge, p, n);
		p += n + (e ? 1 : 0);
	}
	lv2_atom_forge_pop(&self->forge, &tup);
	msg_end(self, &fr);
}

/* The service's ready-made patch:Put of the deviceList, copied as one event. */
SB_REALTIME static void forge_atom(sb_instance *self, const LV2_Atom *a)
{
	const uint32_t size = lv2_atom_total_size(a);
	if (notify_room(self) < size + 32)
		return;
	lv2_atom_forge_frame_time(&self->forge, 0);
	lv2_atom_forge_write(&self->forge, a, size);
	lv2_atom_forge_pad(&self->forge, size);
}

/* The take lane: [patch:Put; patch:body [takeWaveFrames; takeStart; takeFrames; takeWave]],
 * the columns and the one being filled as min, max pairs. False when there is no room. */
SB_REALTIME static bool forge_wave(sb_instance *self)
{
	const sb_wave *w = &self->rt_wave;
	const uint32_t cols = sb_wave_columns(w);
	if (notify_room(self) < SB_MSG_OVERHEAD + 128 + 2 * cols * (uint32_t)sizeof(float))
		return false;
	LV2_Atom_Forge *f = &self->forge;
	const sb_urids *u = &self->u;
	LV2_Atom_Forge_Frame msg, body, vec;
	lv2_atom_forge_frame_time(f, 0);
	lv2_atom_forge_object(f, &msg, 0, u->patch_Put);
	lv2_atom_forge_key(f, u->patch_body);
	lv2_atom_forge_object(f, &body, 0, 0);
	lv2_atom_forge_key(f, u->sb_takeWaveFrames);
	lv2_atom_forge_int(f, (int32_t)w->per_col);
	lv2_atom_forge_key(f, u->sb_takeStart);
	lv2_atom_forge_long(f, self->rt_wave_start);
	lv2_atom_forge_key(f, u->sb_takeFrames);
	lv2_atom_forge_long(f, self->rt_wave_frames);
	lv2_atom_forge_key(f, u->sb_takeWave);
	lv2_atom_forge_vector_head(f, &vec, sizeof(float), u->atom_Float);
	for (uint32_t i = 0; i < cols; i++) {
		const float pair[2] = {i < w->n ? w->lo[i] : w->cur_lo, i < w->n ? w->hi[i] : w->cur_hi};
		lv2_atom_forge_raw(f, pair, sizeof pair);
	}
	lv2_atom_forge_pop(f, &vec);
	lv2_atom_forge_pop(f, &body);
	lv2_atom_forge_pop(f, &msg);
	self->rt_wave_sent = self->rt_wave_frames;
	return true;
}

/* The stem rows: [patch:Put; patch:body [stemViews (stemIndex, stemPeak, stemRms, stemWave)
 * ...]] of the stems the audition holds. False when there is no room. */
SB_REALTIME static bool forge_views(sb_instance *self, const sb_audition *a)
{
	uint32_t shown = 0;
	for (int s = 0; s < SB_PLUGIN_STEMS; s++)
		shown += a->shown[s];
	if (notify_room(self) <
	    SB_MSG_OVERHEAD + shown * (160 + 2 * SB_VIEW_COLS * (uint32_t)sizeof(float)))
		return false;
	LV2_Atom_Forge *f = &self->forge;
	const sb_urids *u = &self->u;
	LV2_Atom_Forge_Frame msg, body, tup, obj;
	lv2_atom_forge_frame_time(f, 0);
	lv2_atom_forge_object(f, &msg, 0, u->patch_Put);
	lv2_atom_forge_key(f, u->patch_body);
	lv2_atom_forge_object(f, &body, 0, 0);
	lv2_atom_forge_key(f, u->sb_stemViews);
	lv2_atom_forge_tuple(f, &tup);
	for (int s = 0; s < SB_PLUGIN_STEMS; s++) {
		if (!a->shown[s])
			continue;
		lv2_atom_forge_object(f, &obj, 0, 0);
		lv2_atom_forge_key(f, u->sb_stemIndex);
		lv2_atom_forge_int(f, s);
		lv2_atom_forge_key(f, u->sb_stemPeak);
		lv2_atom_forge_float(f, a->peak[s]);
		lv2_atom_forge_key(f, u->sb_stemRms);
		lv2_atom_forge_float(f, a->rms[s]);
		lv2_atom_forge_key(f, u->sb_stemWave);
		lv2_atom_forge_vector(f, sizeof(float), u->atom_Float, 2 * SB_VIEW_COLS, a->view[s]);
		lv2_atom_forge_pop(f, &obj);
	}
	lv2_atom_forge_pop(f, &tup);
	lv2_atom_forge_pop(f, &body);
	lv2_atom_forge_pop(f, &msg);
	return true;
}

/* Which take the state speaks of and how many are ahead of it: one patch:Put with both. */
SB_REALTIME static bool forge_job(sb_instance *self)
{
	if (notify_room(self) < SB_MSG_OVERHEAD + 64)
		return false;
	LV2_Atom_Forge *f = &self->forge;
	const sb_urids *u = &self->u;
	LV2_Atom_Forge_Frame msg, body;
	lv2_atom_forge_frame_time(f, 0);
	lv2_atom_forge_object(f, &msg, 0, u->patch_Put);
	lv2_atom_forge_key(f, u->patch_body);
	lv2_atom_forge_object(f, &body, 0, 0);
	lv2_atom_forge_key(f, u->sb_jobTake);
	lv2_atom_forge_int(f, self->rt_job_take);
	lv2_atom_forge_key(f, u->sb_queueAhead);
	lv2_atom_forge_int(f, self->rt_ahead);
	lv2_atom_forge_pop(f, &body);
	lv2_atom_forge_pop(f, &msg);
	self->rt_job_take_sent = self->rt_job_take;
	self->rt_ahead_sent = self->rt_ahead;
	return true;
}

SB_REALTIME static void read_status(sb_instance *self)
{
	/* sb_msg is large: copy one at a time into the instance's own slot. */
	static const size_t cap = 32;
	for (size_t i = 0; i < cap; i++) {
		sb_msg *m = &self->rt_msg;
		if (!sb_ring_pop(&self->status, m))
			break;
		self->rt_state = m->state;
		self->rt_progress = m->progress;
		self->rt_time_left = m->time_left;
		self->rt_device = m->device;
		self->rt_fallback = m->fallback;
		self->rt_jobs_done = m->jobs_done;
		self->rt_job_take = m->take;
		self->rt_ahead = m->ahead;
		if (m->kind == SB_MSG_MANIFEST) {
			memcpy(self->rt_manifest, m->text, sizeof self->rt_manifest);
			self->rt_start = m->start;
			self->rt_frames = m->frames;
			self->rt_announce = true;
		} else if (m->kind == SB_MSG_STEMS) {
			memcpy(self->rt_stems, m->text, sizeof self->rt_stems);
			self->rt_announce_stems = true;
		} else if (m->kind == SB_MSG_DEVICE_IN_USE) {
			memcpy(self->rt_device_in_use, m->text, sizeof self->rt_device_in_use);
			self->rt_announce_device = true;
		} else if (m->kind == SB_MSG_ERROR || m->kind == SB_MSG_SILENT) {
			memcpy(self->rt_error, m->text, sizeof self->rt_error);
			self->rt_announce_error = true;
		} else if (m->kind == SB_MSG_MODELS) {
			memcpy(self->rt_models, m->text, sizeof self->rt_models);
			self->rt_announce_models = true;
		} else if (m->kind == SB_MSG_INSTALL) {
			memcpy(self->rt_install, m->text, sizeof self->rt_install);
			self->rt_announce_install = true;
		} else if (m->kind == SB_MSG_NOTICE) {
			memcpy(self->rt_notice, m->text, sizeof self->rt_notice);
			self->rt_announce_notice = true;
		}
	}
	/* Take a new audition only once the service has freed the one retired before. */
	if (!atomic_load_explicit(&self->audition_retired, memory_order_acquire)) {
		sb_audition *a = atomic_exchange_explicit(&self->audition_pending, NULL,
		                                          memory_order_acq_rel);
		if (a) {
			atomic_store_explicit(&self->audition_retired, self->rt_audition,
			                      memory_order_release);
			self->rt_audition = a;
			self->rt_announce_view = true;
		}
	}
}

/* What goes out on notify. The manifest (with its region) is for the host and the UI alike and
 * always goes; the rest is for a UI and goes only once someone asked with patch:Get (the UI does
 * when it opens), so a session without the UI open carries nothing it does not need. Read-only
 * properties go as patch:Put, writable ones as patch:Set (msg_head). */
SB_REALTIME static void announce(sb_instance *self)
{
	if (self->rt_announce && self->rt_manifest[0]) {
		forge_set_text(self, self->u.sb_manifest, self->u.atom_Path, self->rt_manifest);
		if (self->rt_listener) {
			forge_set_long(self, self->u.sb_timelineStart, self->rt_start);
			forge_set_long(self, self->u.sb_recordedFrames, self->rt_frames);
		}
	}
	if (self->rt_announce_props) {
		forge_set_text(self, self->u.sb_outputDir, self->u.atom_Path, self->props.output_dir);
		forge_set_text(self, self->u.sb_modelFile, self->u.atom_Path, self->props.model_file);
		forge_set_text(self, self->u.sb_trackName, self->u.atom_String, self->props.track);
		forge_set_float(self, self->u.sb_maxMinutes, self->props.max_minutes);
		forge_set_float(self, self->u.sb_uiScale, self->props.ui_scale);
	}
	if (self->rt_listener) {
		const LV2_Atom *devices = atomic_load_explicit(&self->device_list, memory_order_acquire);
		if (devices && (self->rt_announce_devices || devices != self->rt_device_list)) {
			forge_atom(self, devices);
			self->rt_device_list = devices;
		}
		if (self->rt_announce_stems && self->rt_stems[0])
			forge_set_stems(self, self->rt_stems);
		if (self->rt_announce_device && self->rt_device_in_use[0])
			forge_set_text(self, self->u.sb_deviceInUse, self->u.atom_String,
			               self->rt_device_in_use);
		/* an empty lastError clears the last one (a new take began) */
		if (self->rt_announce_error)
			forge_set_text(self, self->u.sb_lastError, self->u.atom_String, self->rt_error);
		if (self->rt_announce_notice)
			forge_set_text(self, self->u.sb_modelNotice, self->u.atom_String, self->rt_notice);
		if ((self->rt_announce_job || self->rt_job_take != self->rt_job_take_sent ||
		     self->rt_ahead != self->rt_ahead_sent) && forge_job(self))
			self->rt_announce_job = false;
		/* the take lane: ten times a second while recording, and once more at the end */
		const bool wave_due = self->rt_recording &&
		                      self->rt_wave_frames - self->rt_wave_sent >= (int64_t)(self->rate / 10);
		if (self->rt_wave_valid && (self->rt_announce_wave || wave_due) && forge_wave(self))
			self->rt_announce_wave = false;
		if (self->rt_announce_view && self->rt_audition && forge_views(self, self->rt_audition))
			self->rt_announce_view = false;
		if (self->rt_announce_models && self->rt_models[0])
			forge_set_text(self, self->u.sb_modelList, self->u.atom_String, self->rt_models);
		if (self->rt_announce_install && self->rt_install[0])
			forge_set_text(self, self->u.sb_installStatus, self->u.atom_String,
			               self->rt_install);
		if (self->rt_announce_limit)
			forge_set_text(self, self->u.sb_lastError, self->u.atom_String,
			               "recording limit reached: the take ends here (maxMinutes)");
		/* the take's length while recording, four times a second, for the UI's clock */
		if (self->rt_recording &&
		    self->rt_take->frames - self->rt_reported_frames >= (int64_t)(self->rate / 4)) {
			forge_set_long(self, self->u.sb_recordedFrames, self->rt_take->frames);
			self->rt_reported_frames = self->rt_take->frames;
		}
	}
	self->rt_announce = self->rt_announce_device = self->rt_announce_error = false;
	self->rt_announce_props = self->rt_announce_stems = self->rt_announce_devices = false;
	self->rt_announce_limit = self->rt_announce_models = self->rt_announce_install = false;
	self->rt_announce_notice = false;
	/* without a listener the lane, the rows and the job wait for one (patch:Get asks again) */
	if (!self->rt_listener)
		self->rt_announce_wave = self->rt_announce_view = false;
}

/* The service thread starts when this instance first needs it: armed for recording, a UI
 * listening, a device chosen (save() then has its stable key), an install asked for, a state
 * restored (takes a stopped host left unfinished are looked for and resumed). The start
 * is handed to the host's worker (work:schedule is a required feature: a thread is never
 * created here, nor in instantiate() or activate(), where a host that only looks at a plugin
 * would have to wait for it). */
SB_REALTIME static void want_service(sb_instance *self)
{
	if (self->rt_service_asked ||
	    atomic_load_explicit(&self->service_running, memory_order_acquire))
		return;
	const bool need = ctl(self, SB_PORT_RECORD, 0.0f) > 0.5f || self->rt_listener ||
	                  ctl_int(self, SB_PORT_DEVICE, 0) >= SB_DEVICE_FIRST_ACCEL ||
	                  sb_ring_count(&self->requests) > 0 ||
	                  atomic_load_explicit(&self->resume_scan, memory_order_acquire);
	if (!need)
		return;
	static const uint8_t start = 1;
	if (self->schedule->schedule_work(self->schedule->handle, sizeof start, &start) ==
	    LV2_WORKER_SUCCESS)
		self->rt_service_asked = true; /* otherwise asked again next cycle */
}

SB_REALTIME static void run(LV2_Handle h, uint32_t n_frames)
{
	sb_instance *self = h;

	if (self->notify) {
		const uint32_t space = self->notify->atom.size;
		lv2_atom_forge_set_buffer(&self->forge, (uint8_t *)self->notify, space);
		lv2_atom_forge_sequence_head(&self->forge, &self->notify_frame, 0);
	}
	/* tells the service to deepen the block pool */
	atomic_store_explicit(&self->freewheeling,
	                      self->freewheel && *self->freewheel > 0.5f, memory_order_relaxed);
	read_status(self);
	if (atomic_exchange_explicit(&self->props_changed, 0, memory_order_acq_rel))
		self->rt_announce_props = true;
	/* the service reads it when a take's stems are committed (keep the recording or not) */
	atomic_store_explicit(&self->keep_take,
	                      self->ctl_keep_take && *self->ctl_keep_take > 0.5f, memory_order_relaxed);
	want_service(self);

	/* the service watches the Model control: a missing model is said before a take needs it */
	atomic_store_explicit(&self->model_port, ctl_int(self, SB_PORT_MODEL, SB_MODEL_AUTO),
	                      memory_order_relaxed);
	const bool armed = ctl(self, SB_PORT_RECORD, 0.0f) > 0.5f;
	if (!armed) {
		take_finish(self);
		self->rt_limit_hit = false;
	}

	uint32_t done = 0;
	if (self->control) {
		LV2_ATOM_SEQUENCE_FOREACH (self->control, ev) {
			uint32_t t = (uint32_t)ev->time.frames;
			if (t > n_frames)
				t = n_frames;
			if (armed && !self->rt_recording && !self->rt_limit_hit && self->rt_have_pos &&
			    self->rt_speed != 0.0f)
				take_start(self);
			render(self, done, t);
			done = t > done ? t : done;
			if (ev->body.type != self->u.atom_Object && ev->body.type != self->u.atom_Blank)
				continue;
			const LV2_Atom_Object *obj = (const LV2_Atom_Object *)&ev->body;
			if (obj->body.otype == self->u.time_Position)
				handle_position(self, obj);
			else if (obj->body.otype == self->u.patch_Set)
				handle_set(self, obj);
			else if (obj->body.otype == self->u.patch_Get)
				self->rt_listener = self->rt_announce = self->rt_announce_device =
					self->rt_announce_error = self->rt_announce_props =
					self->rt_announce_stems = self->rt_announce_devices =
					self->rt_announce_models = self->rt_announce_install =
					self->rt_announce_wave = self->rt_announce_view =
					self->rt_announce_notice = self->rt_announce_job = true;
		}
	}
	if (armed && !self->rt_recording && !self->rt_limit_hit && self->rt_have_pos &&
	    self->rt_speed != 0.0f)
		take_start(self);
	render(self, done, n_frames);

	if (self->notify) {
		announce(self);
		lv2_atom_forge_pop(&self->forge, &self->notify_frame);
	}

	if (self->out_state)
		*self->out_state = (float)(self->rt_recording ? SB_STATE_RECORDING : self->rt_state);
	if (self->out_progress)
		*self->out_progress = self->rt_progress;
	if (self->out_time_left)
		*self->out_time_left = self->rt_time_left;
	if (self->out_device)
		*self->out_device = (float)self->rt_device;
	if (self->out_fallback)
		*self->out_fallback = (float)self->rt_fallback;
	if (self->out_jobs)
		*self->out_jobs = (float)self->rt_jobs_done;
}

/* The worker's one job: start the service (want_service). Ardour runs it inline while
 * freewheeling, inside run(); it only creates a thread and returns. */
static LV2_Worker_Status work(LV2_Handle h, LV2_Worker_Respond_Function respond,
                              LV2_Worker_Respond_Handle rh, uint32_t size, const void *data)
{
	(void)respond;
	(void)rh;
	sb_instance *self = h;
	if (size == 1 && *(const uint8_t *)data == 1)
		return sb_service_start(self) ? LV2_WORKER_SUCCESS : LV2_WORKER_ERR_UNKNOWN;
	return LV2_WORKER_ERR_UNKNOWN;
}

static LV2_Worker_Status work_response(LV2_Handle h, uint32_t size, const void *body)
{
	(void)h;
	(void)size;
	(void)body;
	return LV2_WORKER_SUCCESS;
}

static void deactivate(LV2_Handle h)
{
	/* A take still open when the host stops processing is complete as far as it goes. */
	take_finish(h);
}

static void cleanup(LV2_Handle h)
{
	sb_instance *self = h;
	take_finish(self);
	sb_service_detach(self);
	sb_ring_free(&self->free_blocks);
	sb_ring_free(&self->free_takes);
	sb_ring_free(&self->finished);
	sb_ring_free(&self->status);
	sb_ring_free(&self->requests);
	pthread_mutex_destroy(&self->nrt_lock);
	free(self);
}

static const void *extension_data(const char *uri)
{
	static const LV2_Worker_Interface worker = {work, work_response, NULL};
	if (strcmp(uri, LV2_STATE__interface) == 0)
		return &sb_state_interface;
	if (strcmp(uri, LV2_WORKER__interface) == 0)
		return &worker;
	return NULL;
}

static const LV2_Descriptor descriptors[] = {
	{SB_URI_MONO, instantiate, connect_port, NULL, run, deactivate, cleanup, extension_data},
	{SB_URI_STEREO, instantiate, connect_port, NULL, run, deactivate, cleanup, extension_data},
};

LV2_SYMBOL_EXPORT const LV2_Descriptor *lv2_descriptor(uint32_t index)
{
	return index < 2 ? &descriptors[index] : NULL;
}
