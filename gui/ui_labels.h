/* The words and numbers the window shows, from the model (ui_logic.h): the device list's
 * entries (each distinct: number, name, type, memory), what Auto chose and why, a fallback in
 * the user's words, levels in dB, times, the take lane's caption, what audition plays, the
 * tooltips. Pure data in, strings out (tests/gui/test_ui_labels.c).
 *
 * Thread: the host's UI thread; nothing here allocates or blocks.
 */
#ifndef SBUI_LABELS_H
#define SBUI_LABELS_H

#include "ui_layout.h"
#include "ui_logic.h"

#include <stdbool.h>
#include <stdint.h>

/* The stem's name as the window shows it: "Vocals" .. "Piano"; "?" out of range. */
const char* sbui_stem_title(int stem);

/* The Device list: its entries in order (Auto, CPU, Device 1.., All devices once there is a
 * device besides the CPU, and the chosen one when it is none of those: a device this machine
 * lacks), as port values. Returns how many (at most SBUI_MAX_DEVICES + 4). */
int sbui_device_choices(const sbui_model* m, float* values);
/* One entry: title "Device 2: pthread-skylake", detail "OpenCL CPU · 7.8 GiB · Portable
 * Computing Language"; Auto, CPU and All devices say what they do. */
void sbui_device_entry(const sbui_model* m, float value, char* title, int tsize, char* detail,
                       int dsize);
/* Whether the entry is the device the last job ran on ("in use"): its port value is the
 * device-in-use output, or All devices when several shared it. */
bool sbui_device_entry_in_use(const sbui_model* m, float value);

/* "12.0 GiB", "512 MiB"; "" for unknown (< 0). */
void sbui_memory_text(int64_t bytes, char* out, int size);

/* What Auto chose and why, when the Device control is on Auto: "Auto chose the CPU: no GPU
 * here (the 2 OpenCL devices are processors)"; before a job, what it will choose. "" when the
 * control is not on Auto. */
void sbui_auto_text(const sbui_model* m, char* out, int size);
/* The last job's fallback in the user's words: which device is missing (numbered as the Device
 * button numbers it) or failed, and what ran instead: "Device 8 is not on this machine (it has
 * 2 devices besides the CPU): the CPU ran the take instead". "" when the device in use is no
 * fallback. */
void sbui_fallback_text(const sbui_model* m, char* out, int size);

/* "-3.2 dB"; "silent" for 0. */
void sbui_db_text(float linear, char* out, int size);
/* A stem row's levels: "peak -3.2 dB · RMS -18.5 dB", or compact "-3.2 / -18.5 dB". */
void sbui_levels_text(float peak, float rms, bool compact, char* out, int size);
/* A time on the timeline or a length: "1:05.250" (minutes, seconds, milliseconds); hours
 * when there are any: "1:02:05.000". */
void sbui_time_text(int64_t frames, double rate, char* out, int size);

/* The take lane's caption: "Recording · 0:12.400 from 1:05.000 · peak -6.0 dB", or
 * "Take 3 · 0:12.400 from 1:05.000" once it ended (take unknown: "Last take"); "" without a
 * take. */
void sbui_lane_caption(const sbui_model* m, char* out, int size);

/* What audition plays, for the badge: "Playing vocals alone in take 2 (1:05.000 to
 * 1:17.400), while the transport is there"; "" when off. */
void sbui_audition_badge(const sbui_model* m, char* out, int size);

/* The window zoom's button: "Zoom 125 %" (chosen), "Zoom auto (200 %)" (the host's or Xft's). */
void sbui_zoom_label(float own, float effective, char* out, int size);

/* A part's tooltip (parts: ui_layout.h), "" none: what it does and its key. row_stem and
 * row_path: the stem and file of a stem row's part; scale and scale_source: the window's zoom
 * now and where it comes from (sbui_scale_pick). */
void sbui_tooltip(const sbui_model* m, int widget, int row_stem, const char* row_path,
                  double scale, const char* scale_source, char* out, int size);

#endif
