/* URIs and port indices of the Stembridge plugins, shared by the plugin (plugin/), the UI
 * (gui/) and, by hand, the Turtle (ttl/) and the tests. Change all of them together.
 * After eg-sampler's uris.h.
 */
#ifndef SB_URIS_H
#define SB_URIS_H

#define SB_URI          "https://stembridge.org/lv2/stembridge"
#define SB_URI_MONO     SB_URI "#mono"
#define SB_URI_STEREO   SB_URI "#stereo"
#define SB_URI_UI       SB_URI "#ui"
#define SB__            SB_URI "#"

/* patch properties (atom messages on the control/notify ports). The plugin announces the
 * patch:writable ones with patch:Set and the read-only ones with patch:Put (a body object of
 * property: value), since Ardour 7.3 warns on every patch:Set of a property it may not write. */
#define SB__outputDir    SB__ "outputDir"     /* atom:Path, patch:writable: where stems go when
                                                 the host's makePath is not safe */
#define SB__modelFile    SB__ "modelFile"     /* atom:Path, patch:writable: a converted Demucs
                                                 model (.safetensors), used when the Model
                                                 control is not Built-in */
#define SB__manifest     SB__ "manifest"      /* atom:Path, patch:readable: last job's manifest */
#define SB__deviceKey    SB__ "deviceKey"     /* atom:String: stable key of the chosen device */
#define SB__deviceName   SB__ "deviceName"    /* atom:String: its readable name */
#define SB__deviceInUse  SB__ "deviceInUse"   /* atom:String: label of the device running now,
                                                 with the fallback reason when there is one */
#define SB__deviceList   SB__ "deviceList"    /* atom:Tuple of atom:Object, one per accelerator
                                                 device in port order (Device 1 = first):
                                                 the keys below */
#define SB__lastError    SB__ "lastError"     /* atom:String */
#define SB__stems        SB__ "stems"         /* atom:Tuple of atom:Path: last job's stems */
#define SB__modelList    SB__ "modelList"     /* atom:String: the models, one per line: name,
                                                 title, stems (comma-separated), installed (0/1),
                                                 download bytes, separated by tabs */
#define SB__installModel SB__ "installModel"  /* atom:String, UI -> plugin: install this model */
#define SB__installStatus SB__ "installStatus" /* atom:String: the install in progress or how the
                                                  last one ended */
#define SB__recordedFrames SB__ "recordedFrames" /* atom:Long */
#define SB__timelineStart  SB__ "timelineStart"  /* atom:Long: region start, samples */
#define SB__maxMinutes   SB__ "maxMinutes"    /* atom:Float, patch:writable: recording limit */
#define SB__uiScale      SB__ "uiScale"       /* atom:Float, patch:writable: the plugin window's
                                                 own zoom (0: the host's scale factor, else
                                                 Xft.dpi), saved with the session */
/* the uiScale values a UI may choose besides 0 */
#define SB_UI_SCALE_MIN 0.5f
#define SB_UI_SCALE_MAX 4.0f
#define SB__modelNotice  SB__ "modelNotice"   /* atom:String: the Model control names a model
                                                 that is not installed (how to install it); ""
                                                 none. A notice, not an error: the state stays */
#define SB__jobTake      SB__ "jobTake"       /* atom:Int: the take number the state and
                                                 progress speak of; 0 none */
#define SB__queueAhead   SB__ "queueAhead"    /* atom:Int: while that take is queued, the takes
                                                 (of any track) ahead of it */
/* The take lane: patch:Put of the take being recorded (or the last one), a few times a second
 * while recording and once at its end: */
#define SB__takeWave     SB__ "takeWave"      /* atom:Vector of atom:Float: min, max of each
                                                 column of frames, in order */
#define SB__takeWaveFrames SB__ "takeWaveFrames" /* atom:Int: frames per column */
#define SB__takeStart    SB__ "takeStart"     /* atom:Long: where the take starts, samples */
#define SB__takeFrames   SB__ "takeFrames"    /* atom:Long: its length so far */
/* The stems of the last take, once the audition has them: stemViews, an atom:Tuple of one
 * object per stem with these keys: */
#define SB__stemViews    SB__ "stemViews"
#define SB__stemIndex    SB__ "stemIndex"     /* atom:Int: canonical stem (vocals 0 .. piano 5) */
#define SB__stemPeak     SB__ "stemPeak"      /* atom:Float: largest |sample| (the manifest's) */
#define SB__stemRms      SB__ "stemRms"       /* atom:Float: RMS (the manifest's) */
#define SB__stemWave     SB__ "stemWave"      /* atom:Vector of atom:Float: min, max per column */
#define SB__trackName    SB__ "trackName"     /* atom:String, patch:writable: names stem files */
/* keys of each device object in the deviceList tuple (deviceKey and deviceName too) */
#define SB__devicePlatform SB__ "devicePlatform" /* atom:String */
#define SB__deviceType     SB__ "deviceType"     /* atom:String: "discrete GPU", "OpenCL CPU" ... */
#define SB__deviceMemory   SB__ "deviceMemory"   /* atom:Long: global memory, bytes */
#define SB__deviceUnits    SB__ "deviceUnits"    /* atom:Int: compute units */
#define SB__deviceDriver   SB__ "deviceDriver"   /* atom:String: driver version */
/* state only */
#define SB__devicePort   SB__ "devicePort"    /* atom:Int: device port value deviceKey stands for */
#define SB__instanceId   SB__ "instanceId"    /* atom:String: names stems when no trackName is set */
#define SB__lastTake     SB__ "lastTake"      /* atom:Int: the last take number used */
#define SB__mode         SB__ "mode"          /* atom:Int */
#define SB__model        SB__ "model"         /* atom:Int */
#define SB__stemMask     SB__ "stemMask"      /* atom:Int: bit s = stem s written */
#define SB__precision    SB__ "precision"     /* atom:Int: SB_PRECISION_* */
#define SB__keepTake     SB__ "keepTake"      /* atom:Int: 1 keep each take's recording */

/* Control values */
/* Device control: Auto, CPU, Device 1..8 (the k-th device of deviceList), and All devices (every
 * GPU and the CPU share each take's segments), last so that no saved value moves. */
enum {
	SB_DEVICE_AUTO = 0, SB_DEVICE_CPU = 1, SB_DEVICE_FIRST_ACCEL = 2, SB_DEVICE_N_ACCEL = 8,
	SB_DEVICE_ALL = SB_DEVICE_FIRST_ACCEL + SB_DEVICE_N_ACCEL, SB_DEVICE_MAX = SB_DEVICE_ALL
};
enum { SB_MODE_CTL_PARALLEL = 0, SB_MODE_CTL_SEQUENTIAL = 1 };
/* Model control values; Auto (the default) is the best installed model, htdemucs first. */
enum {
	SB_MODEL_BUILTIN = 0, SB_MODEL_HTDEMUCS = 1, SB_MODEL_HTDEMUCS_FT = 2, SB_MODEL_HTDEMUCS_6S = 3,
	SB_MODEL_AUTO = 4, SB_N_MODEL_CHOICES
};
/* The engine's name of each Model control value ("auto" resolves to an installed model). */
static const char *const sb_model_choice_names[SB_N_MODEL_CHOICES] = {
	"builtin", "htdemucs", "htdemucs_ft", "htdemucs_6s", "auto"};

/* Stems by canonical index (stembridge.h: SB_STEM_*): vocals, drums, bass, other, guitar, piano. */
#define SB_PLUGIN_STEMS 6
/* audition: 0 off (input passes); 1..4 vocals, drums, bass, other; 5..8 the mix without one of
 * them; 9, 10 guitar, piano; 11, 12 the mix without one of those */
enum { SB_AUDITION_OFF = 0, SB_AUDITION_MAX = 12 };
/* The stem an audition value plays (or leaves out, *without = 1), -1 for off. */
static inline int sb_audition_stem(int sel, int *without)
{
	*without = (sel >= 5 && sel <= 8) || sel >= 11;
	return sel >= 1 && sel <= 4   ? sel - 1
	     : sel >= 5 && sel <= 8   ? sel - 5
	     : sel >= 9 && sel <= 10  ? sel - 5
	     : sel >= 11 && sel <= 12 ? sel - 7
	                              : -1;
}
/* The audition value that plays stem s alone (without = 0) or the mix without it (1). */
static inline int sb_audition_value(int s, int without)
{
	if (s < 0 || s >= SB_PLUGIN_STEMS)
		return SB_AUDITION_OFF;
	return s < 4 ? (without ? s + 5 : s + 1) : (without ? s + 7 : s + 5);
}
/* SB_STATE_SILENT: the last take was silent (below stembridge.h's SB_SILENT_DBFS throughout:
 * with Ardour's hardware monitoring a recording track feeds its plugins silence), so no job was
 * queued.
 * SB_STATE_RESUMED: a take the host left unfinished when it stopped (killed, crashed, quit) is
 * queued or separating again, from its recording on disk (the Progress port counts). */
enum {
	SB_STATE_IDLE = 0, SB_STATE_RECORDING, SB_STATE_QUEUED, SB_STATE_SEPARATING, SB_STATE_DONE,
	SB_STATE_ERROR, SB_STATE_SILENT, SB_STATE_RESUMED
};

/* Port indices, identical in the mono and stereo plugins up to the audio ports. */
typedef enum {
	SB_PORT_CONTROL = 0,     /* atom input: time:Position, patch:Set/Get */
	SB_PORT_NOTIFY,          /* atom output: patch:Set to UI and host */
	SB_PORT_RECORD,          /* toggle: armed */
	SB_PORT_DEVICE,          /* enumeration, SB_DEVICE_* */
	SB_PORT_MODE,            /* SB_MODE_CTL_* */
	SB_PORT_MODEL,           /* SB_MODEL_* */
	SB_PORT_STEM_VOCALS,     /* toggles: which stems to write */
	SB_PORT_STEM_DRUMS,
	SB_PORT_STEM_BASS,
	SB_PORT_STEM_OTHER,
	SB_PORT_AUDITION,        /* SB_AUDITION_* */
	SB_PORT_STATE_OUT,       /* SB_STATE_* */
	SB_PORT_PROGRESS_OUT,    /* 0..1 */
	SB_PORT_DEVICE_OUT,      /* device in use, SB_DEVICE_* numbering; -1 none */
	SB_PORT_FALLBACK_OUT,    /* 1 when the device in use is a fallback */
	SB_PORT_JOBS_DONE_OUT,   /* counts jobs whose stems are ready (the importer watches it) */
	SB_PORT_AUDIO_IN_1,      /* mono: in, out; stereo: in L, in R, out L, out R */
	SB_PORT_AUDIO_IN_2_OR_OUT_1,
	SB_PORT_AUDIO_OUT_1_STEREO,
	SB_PORT_AUDIO_OUT_2_STEREO,
	SB_N_PORTS_STEREO
} sb_port_index;
#define SB_N_PORTS_MONO (SB_PORT_AUDIO_IN_1 + 2)
/* After the audio ports, so that no index a saved session uses ever moves: the
 * lv2:freeWheeling input (optional connection), then the guitar and piano stem toggles. */
#define SB_PORT_FREEWHEEL_MONO   SB_N_PORTS_MONO
#define SB_PORT_FREEWHEEL_STEREO SB_N_PORTS_STEREO
#define SB_PORT_STEM_GUITAR_MONO   (SB_N_PORTS_MONO + 1)
#define SB_PORT_STEM_PIANO_MONO    (SB_N_PORTS_MONO + 2)
#define SB_PORT_STEM_GUITAR_STEREO (SB_N_PORTS_STEREO + 1)
#define SB_PORT_STEM_PIANO_STEREO  (SB_N_PORTS_STEREO + 2)
/* Then the time left of the separation running now (seconds, -1 not known). */
#define SB_PORT_TIME_LEFT_MONO   (SB_N_PORTS_MONO + 3)
#define SB_PORT_TIME_LEFT_STEREO (SB_N_PORTS_STEREO + 3)
/* Then the precision of the matrix products: SB_PRECISION_* (saved with the session). */
#define SB_PORT_PRECISION_MONO   (SB_N_PORTS_MONO + 4)
#define SB_PORT_PRECISION_STEREO (SB_N_PORTS_STEREO + 4)
/* Then whether each take's recording stays beside its stems (saved with the session): off, the
 * recording goes once the stems are committed. */
#define SB_PORT_KEEP_TAKE_MONO   (SB_N_PORTS_MONO + 5)
#define SB_PORT_KEEP_TAKE_STEREO (SB_N_PORTS_STEREO + 5)
#define SB_N_PORTS_ALL_MONO   (SB_N_PORTS_MONO + 6)
#define SB_N_PORTS_ALL_STEREO (SB_N_PORTS_STEREO + 6)
enum { SB_PRECISION_FP32 = 0, SB_PRECISION_BF16 = 1 };

static inline unsigned sb_port_freewheel(int channels)
{
	return channels == 1 ? SB_PORT_FREEWHEEL_MONO : SB_PORT_FREEWHEEL_STEREO;
}

static inline unsigned sb_port_keep_take(int channels)
{
	return channels == 1 ? SB_PORT_KEEP_TAKE_MONO : SB_PORT_KEEP_TAKE_STEREO;
}

static inline unsigned sb_port_precision(int channels)
{
	return channels == 1 ? SB_PORT_PRECISION_MONO : SB_PORT_PRECISION_STEREO;
}

static inline unsigned sb_port_time_left(int channels)
{
	return channels == 1 ? SB_PORT_TIME_LEFT_MONO : SB_PORT_TIME_LEFT_STEREO;
}

/* The stem toggle port of canonical stem s (0..5) in the plugin with 'channels' channels. */
static inline unsigned sb_port_stem(int channels, int s)
{
	if (s < 4)
		return (unsigned)(SB_PORT_STEM_VOCALS + s);
	return (unsigned)((channels == 1 ? SB_PORT_STEM_GUITAR_MONO : SB_PORT_STEM_GUITAR_STEREO) +
	                  (s - 4));
}

#endif
