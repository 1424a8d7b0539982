/* The plugin's messages into the window's model: the URIDs the UI uses, and each patch:Set
 * (writable properties) and patch:Put (read-only ones: deviceList, deviceInUse, stems,
 * stemViews, takeWave, manifest, lastError, modelNotice, jobTake, queueAhead, ...) that comes
 * on the notify port, read with every size and type checked (plugin/uris.h says what each is).
 *
 * Thread: the host's UI thread (port_event).
 */
#ifndef SBUI_MESSAGES_H
#define SBUI_MESSAGES_H

#include "ui_logic.h"

#include <lv2/atom/atom.h>
#include <lv2/urid/urid.h>

typedef struct {
	LV2_URID atom_eventTransfer, atom_Object, atom_Tuple, atom_String, atom_Path, atom_Long,
		atom_Int, atom_Float, atom_URID, atom_Vector, patch_Set, patch_Get, patch_Put, patch_body,
		patch_property, patch_value, device_list, device_in_use, stems, last_error, manifest,
		recorded_frames, timeline_start, dev_key, dev_name, dev_platform, dev_type, dev_memory,
		dev_units, dev_driver, model_list, install_model, install_status, ui_scale, model_notice,
		job_take, queue_ahead, take_wave, take_wave_frames, take_start, take_frames, stem_views,
		stem_index, stem_peak, stem_rms, stem_wave;
} sbui_uris;


void sbui_uris_map(sbui_uris* u, LV2_URID_Map* map);
/* One message from the plugin (a patch:Set or patch:Put object) into m. */
void sbui_message_read(const sbui_uris* u, sbui_model* m, const LV2_Atom_Object* obj);

#endif
