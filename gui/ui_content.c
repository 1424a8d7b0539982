/* What each part of the window says now. See ui_content.h. */
#include "ui_content.h"

#include "ui_labels.h"

#include "../plugin/uris.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char* set(sbui_shown* o, int w, const char* fmt, const char* a)
{
	snprintf(o->text[w], SBUI_TEXT, fmt, a);
	o->content.text[w] = o->text[w];
	return o->text[w];
}

static void show_in_use(const sbui_model* m, sbui_shown* o)
{
	char dev[SBUI_TEXT], reason[SBUI_TEXT], why[SBUI_LONG_TEXT];
	bool warn = false;
	sbui_in_use_parts(m, dev, reason, SBUI_TEXT, &warn);
	sbui_fallback_text(m, why, sizeof why);
	if (!why[0])
		sbui_auto_text(m, why, sizeof why);
	snprintf(o->in_use, sizeof o->in_use, "In use: %s%s%s",
	         m->device_out_port < 0 && !m->device_in_use[0] ? "nothing yet" : dev,
	         why[0] ? "\n" : "", why);
	o->content.text[SBUI_W_IN_USE] = o->in_use;
	o->fallback = warn;
}

static void show_model(const sbui_model* m, const sbui_show_in* in, sbui_shown* o)
{
	sbui_model_label(m, in->ports[SB_PORT_MODEL], o->text[SBUI_W_MODEL], SBUI_TEXT);
	o->content.text[SBUI_W_MODEL] = o->text[SBUI_W_MODEL];
	char offer[64];
	int64_t bytes = 0;
	if (sbui_model_install_offer(m, offer, sizeof offer, &bytes)) {
		snprintf(o->text[SBUI_W_INSTALL], SBUI_TEXT, "Install (%.0f MB)", (double)bytes / 1e6);
		o->content.text[SBUI_W_INSTALL] = o->text[SBUI_W_INSTALL];
		o->on[SBUI_W_INSTALL] = true;
		o->on_rgb[SBUI_W_INSTALL] = 0x2f7a3f;
	}
	/* the notice: the model is missing, or how its install goes */
	const bool busy = sbui_installing(m);
	if (m->model_notice[0] && !busy) {
		o->content.text[SBUI_W_NOTICE] = m->model_notice;
		o->notice_rgb = 0xe0b050;
	} else if (m->install_status[0]) {
		snprintf(o->text[SBUI_W_NOTICE], SBUI_TEXT, "%s", m->install_status);
		if (busy)
			snprintf(o->text[SBUI_W_NOTICE], SBUI_TEXT, "%.200s (%d %%)", m->install_status,
			         (int)lrintf(m->install_fraction * 100));
		o->content.text[SBUI_W_NOTICE] = o->text[SBUI_W_NOTICE];
		const bool failed = strstr(m->install_status, "not installed") != NULL;
		o->notice_rgb = failed ? 0xff8080 : busy ? 0xd8dce2 : 0x8fd18f;
	}
}

static void show_stems(const sbui_model* m, const sbui_show_in* in, sbui_shown* o)
{
	sbui_content* c = &o->content;
	if (!m->n_stems || !o->status.stems_heading[0])
		return;
	c->text[SBUI_W_STEMS_HEADING] = o->status.stems_heading;
	set(o, SBUI_W_OPEN, "%s", "Open folder");
	set(o, SBUI_W_COPY, "%s", in->copied ? "Copied" : "Copy path");
	const char* slash = strrchr(m->stems[0], '/');
	snprintf(o->folder, sizeof o->folder, "%.*s", slash ? (int)(slash - m->stems[0]) : 0,
	         m->stems[0]);
	o->folder_note = in->note != NULL;
	c->text[SBUI_W_FOLDER] = in->note ? in->note : o->folder;
	/* a row per stem file, in canonical order (stems the model does not make have none) */
	int k = 0;
	const bool compact = in->width < 560;
	for (int s = 0; s < SBUI_STEM_KINDS && k < SBUI_ROWS; s++)
		for (int i = 0; i < m->n_stems; i++) {
			if (sbui_stem_of_path(m->stems[i]) != s)
				continue;
			o->row_stem[k] = s;
			snprintf(o->row_path[k], SBUI_TEXT, "%s", m->stems[i]);
			const int nm = sbui_row_part(k, SBUI_ROW_NAME), lv = sbui_row_part(k, SBUI_ROW_LEVELS);
			set(o, nm, "%s", sbui_stem_title(s));
			set(o, sbui_row_part(k, SBUI_ROW_WAVE), "%s", "");
			if (m->views[s].valid)
				sbui_levels_text(m->views[s].peak, m->views[s].rms, compact, o->text[lv],
				                 SBUI_TEXT);
			else
				snprintf(o->text[lv], SBUI_TEXT, "reading\xe2\x80\xa6");
			c->text[lv] = o->text[lv];
			const int so = sbui_row_part(k, SBUI_ROW_SOLO), mu = sbui_row_part(k, SBUI_ROW_MUTE);
			set(o, so, "%s", "S");
			set(o, mu, "%s", "M");
			o->on[so] = sbui_audition_is(m->audition_port, s, false);
			o->on_rgb[so] = 0xe5c07b;
			o->on[mu] = sbui_audition_is(m->audition_port, s, true);
			o->on_rgb[mu] = 0xb0413e;
			k++;
			break;
		}
	char badge[SBUI_TEXT];
	sbui_audition_badge(m, badge, sizeof badge);
	if (badge[0]) {
		snprintf(o->badge, sizeof o->badge, "\xe2\x96\xb6 %s", badge);
		c->text[SBUI_W_BADGE] = o->badge;
	}
}

void sbui_shown_make(const sbui_model* m, const sbui_show_in* in, sbui_shown* o)
{
	sbui_content* c = &o->content;
	memset(c, 0, sizeof *c);
	memset(o->on, 0, sizeof o->on);
	o->fallback = o->folder_note = false;
	o->notice_rgb = 0;
	for (int k = 0; k < SBUI_ROWS; k++)
		o->row_stem[k] = -1;
	sbui_status_make(m, &o->status);

	set(o, SBUI_W_TITLE, "%s", "Stembridge");
	sbui_zoom_label(m->ui_scale, (float)in->scale, o->text[SBUI_W_ZOOM], SBUI_TEXT);
	c->text[SBUI_W_ZOOM] = o->text[SBUI_W_ZOOM];
	set(o, SBUI_W_DEVICE_LABEL, "%s", "Device");
	sbui_device_label(m, m->device_port, o->text[SBUI_W_DEVICE], SBUI_TEXT);
	c->text[SBUI_W_DEVICE] = o->text[SBUI_W_DEVICE];
	show_in_use(m, o);

	const bool armed = in->ports[SB_PORT_RECORD] > 0.5f;
	set(o, SBUI_W_RECORD, "%s", armed ? "\xe2\x97\x8f Armed" : "\xe2\x97\x8b Record");
	o->on[SBUI_W_RECORD] = armed;
	o->on_rgb[SBUI_W_RECORD] = 0xa82b2b;
	set(o, SBUI_W_MODE, "%s", in->ports[SB_PORT_MODE] > 0.5f ? "Sequential" : "Parallel");
	set(o, SBUI_W_PRECISION, "%s",
	    in->ports[sb_port_precision(in->channels)] > 0.5f ? "BF16 (fast)" : "FP32");
	const bool keep = in->ports[sb_port_keep_take(in->channels)] > 0.5f;
	set(o, SBUI_W_KEEP, "%s", keep ? "\xe2\x98\x91 Keep take" : "\xe2\x98\x90 Keep take");
	o->on[SBUI_W_KEEP] = keep;
	o->on_rgb[SBUI_W_KEEP] = 0x2e6e9e;
	set(o, SBUI_W_MODEL_LABEL, "%s", "Model");
	show_model(m, in, o);

	/* the stems to write: those the model makes (the others are hidden, not greyed) */
	set(o, SBUI_W_TOGGLES_LABEL, "%s", "Stems");
	for (int s = 0; s < SBUI_STEM_KINDS; s++) {
		if (!sbui_model_makes(m, s))
			continue;
		const bool on = in->ports[sb_port_stem(in->channels, s)] > 0.5f;
		snprintf(o->text[SBUI_W_TOGGLE0 + s], SBUI_TEXT, "%s %s", on ? "\xe2\x98\x91" : "\xe2\x98\x90",
		         sbui_stem_title(s));
		c->text[SBUI_W_TOGGLE0 + s] = o->text[SBUI_W_TOGGLE0 + s];
		o->on[SBUI_W_TOGGLE0 + s] = on;
		o->on_rgb[SBUI_W_TOGGLE0 + s] = 0x2e6e9e;
	}
	set(o, SBUI_W_LANE, "%s", "");
	sbui_lane_caption(m, o->text[SBUI_W_LANE_CAPTION], SBUI_TEXT);
	if (o->text[SBUI_W_LANE_CAPTION][0])
		c->text[SBUI_W_LANE_CAPTION] = o->text[SBUI_W_LANE_CAPTION];
	c->text[SBUI_W_STATUS] = o->status.headline;
	if (o->status.detail[0])
		c->text[SBUI_W_DETAIL] = o->status.detail;
	show_stems(m, in, o);
}
