/* Take folders: where a take's folder goes (the host's lasting scratch folder, the outputDir
 * property or the default), the name its files carry, a new number for each take that no
 * take of this track used (in the folder, or imported into the Ardour session), and the
 * folder's removal when its take wrote nothing. take_store.c keeps what goes inside one.
 *
 * Threads: the service thread, and cleanup. Never run().
 */
#include "service.h"

#include "stembridge.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Removes the folders makePath made for a path we will not use (Carla's
 * "<project or cwd>/<client>.tmp/<plugin>/stembridge"): ours, the plugin's folder when it is
 * empty, and the client's ".tmp" folder when that is empty too. rmdir() leaves anything that is
 * not empty. */
static void unmake_host_path(char *p)
{
	for (int level = 0; level < 3; level++) {
		char *slash = strrchr(p, '/');
		if (!slash || slash == p)
			return;
		*slash = '\0';
		if (level == 2) {
			size_t n = strlen(p);
			if (n < 4 || strcmp(p + n - 4, ".tmp") != 0)
				return;
		}
		if (rmdir(p) != 0)
			return;
	}
}

/* The folder this instance's take folders go in. Ardour's makePath gives
 * <session>/plugins/<insert id>/scratch/<path>, which lasts with the session; other hosts'
 * folders may not (Carla deletes its own: ../shared/HOSTS.md), so only a path of that shape is
 * used, and what another host's makePath created is removed again and not asked for twice.
 * Otherwise the outputDir property, or the default under $XDG_DATA_HOME. *session gets the
 * Ardour session folder ("" elsewhere): its imported files count for take numbers too. */
bool sb_take_folder_root(sb_instance *self, const sb_props *pr, char *root, size_t len,
                         char *session, size_t slen)
{
	session[0] = '\0';
	if (self->make_path && self->nrt_scratch >= 0) {
		char *p = self->make_path->path(self->make_path->handle, "stembridge/takes");
		const char *plugins = p ? strstr(p, "/plugins/") : NULL;
		const size_t n = p ? strlen(p) : 0;
		static const char tail[] = "/scratch/stembridge/takes";
		const bool lasting = p && p[0] == '/' && plugins && n > sizeof tail &&
		                     strcmp(p + n - (sizeof tail - 1), tail) == 0 && n < len;
		if (lasting) {
			snprintf(root, len, "%.*s", (int)(n - strlen("/takes")), p);
			snprintf(session, slen, "%.*s", (int)(plugins - p), p);
			self->nrt_scratch = 1;
		} else if (p && p[0] == '/') {
			lv2_log_note(&self->logger, "stembridge: the host's scratch folder (%s) does not "
			             "last with a project; stems go to the output folder\n", p);
			unmake_host_path(p);
			self->nrt_scratch = -1;
		}
		if (p && self->free_path)
			self->free_path->free_path(self->free_path->handle, p);
		else
			free(p);
		if (lasting)
			return true;
	}
	int w;
	struct stat st;
	if (pr->output_dir[0] == '/') {
		w = snprintf(root, len, "%s", pr->output_dir);
		/* a file (one without an extension: set_path() took it for a folder) stands for the
		 * folder it is in */
		char *slash = strrchr(root, '/');
		if (stat(root, &st) == 0 && !S_ISDIR(st.st_mode) && slash)
			*(slash == root ? slash + 1 : slash) = '\0';
	} else {
		const char *xdg = sb_knob_get("XDG_DATA_HOME");
		const char *home = sb_knob_get("HOME");
		if (xdg && xdg[0] == '/')
			w = snprintf(root, len, "%s/stembridge/stems", xdg);
		else
			w = snprintf(root, len, "%s/.local/share/stembridge/stems", home ? home : "/tmp");
	}
	return w > 0 && (size_t)w < len;
}

/* The largest take number of track that of() finds for an entry of dir (0: none). */
static uint32_t max_take_over(const char *dir, const char *track,
                              uint32_t (*of)(const char *dir, const char *entry,
                                             const char *track))
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	uint32_t best = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		const uint32_t n = of(dir, e->d_name, track);
		best = n > best ? n : best;
	}
	closedir(d);
	return best;
}

/* An entry named after one of track's takes: its folder, or a stem file. */
static uint32_t take_of_name(const char *dir, const char *entry, const char *track)
{
	(void)dir;
	return sb_take_number(entry, track);
}

static uint32_t max_take_in(const char *dir, const char *track)
{
	return max_take_over(dir, track, take_of_name);
}

/* Ardour copies imported stems into <session>/interchange/<name>/audiofiles under their own
 * names: a take number used there is used (importing a name the session holds asks a modal
 * question). */
static uint32_t take_of_interchange(const char *dir, const char *entry, const char *track)
{
	char sub[SB_TEXT];
	if (entry[0] == '.' ||
	    snprintf(sub, sizeof sub, "%s/%s/audiofiles", dir, entry) >= (int)sizeof sub)
		return 0;
	return max_take_in(sub, track);
}

static uint32_t max_take_in_session(const char *session, const char *track)
{
	char dir[SB_TEXT];
	if (snprintf(dir, sizeof dir, "%s/interchange", session) >= (int)sizeof dir)
		return 0;
	return max_take_over(dir, track, take_of_interchange);
}

/* What a host killed mid-take left in this track's take folders: temporary files (removed when
 * their writer is gone; never a live writer's), and the folder when that emptied it (its number
 * is free again: nothing was written under it). */
static void clean_take_folders(const char *root, const char *track)
{
	DIR *d = opendir(root);
	if (!d)
		return;
	const sb_logger log = {sb_service_log, NULL};
	struct dirent *e;
	while ((e = readdir(d))) {
		char sub[SB_TEXT];
		if (!sb_take_number(e->d_name, track) ||
		    snprintf(sub, sizeof sub, "%s/%s", root, e->d_name) >= (int)sizeof sub)
			continue;
		struct stat st;
		if (stat(sub, &st) != 0 || !S_ISDIR(st.st_mode))
			continue;
		/* a folder emptied here was a killed take's; an empty one is another take's */
		if (sb_temp_clean_stale(sub, &log) > 0)
			rmdir(sub);
	}
	closedir(d);
}

/* The name a take's files carry: the trackName, or "track-<instanceId>" (stable: the id is
 * saved with the session). File-name safe. */
void sb_take_folder_track(sb_instance *self, const sb_props *pr, char *out, size_t len)
{
	if (pr->track[0]) {
		snprintf(out, len, "%s", pr->track);
	} else {
		pthread_mutex_lock(&self->nrt_lock);
		snprintf(out, len, "track-%s", self->nrt_id);
		pthread_mutex_unlock(&self->nrt_lock);
	}
	for (char *c = out; *c; c++)
		if (*c == '/' || *c == '\\' || *c == ':' || (unsigned char)*c < 32)
			*c = '_';
	if (out[0] == '.')
		out[0] = '_';
}

/* Makes the take's own folder "<root>/<track>-take<N>", N one past any this instance, the
 * folder or (Ardour) the session used: the folder is reserved before the job writes into it, so
 * two takes never share one. *made_root: the root did not exist before. */
bool sb_take_folder_make(sb_instance *self, const char *root, const char *session,
                         const char *track, char *take, size_t tlen, char *dir, size_t dlen,
                         bool *made_root)
{
	struct stat st;
	*made_root = stat(root, &st) != 0;
	char tmp[SB_TEXT + 8];
	snprintf(tmp, sizeof tmp, "%s/x", root);
	if (sb_make_parents(tmp) != 0) {
		lv2_log_error(&self->logger, "stembridge: cannot create %s: %s\n", root, strerror(errno));
		return false;
	}
	clean_take_folders(root, track);
	pthread_mutex_lock(&self->nrt_lock);
	uint32_t n = self->nrt_last_take;
	pthread_mutex_unlock(&self->nrt_lock);
	uint32_t m = max_take_in(root, track);
	n = m > n ? m : n;
	if (session[0]) {
		m = max_take_in_session(session, track);
		n = m > n ? m : n;
	}
	for (int tries = 0; tries < 1000; tries++) {
		n++;
		snprintf(take, tlen, "take%u", n);
		if (snprintf(dir, dlen, "%s/%s-%s", root, track, take) >= (int)dlen) {
			lv2_log_error(&self->logger, "stembridge: output folder name too long\n");
			break;
		}
		if (mkdir(dir, 0777) == 0) {
			pthread_mutex_lock(&self->nrt_lock);
			self->nrt_last_take = n;
			pthread_mutex_unlock(&self->nrt_lock);
			return true;
		}
		if (errno != EEXIST) {
			lv2_log_error(&self->logger, "stembridge: cannot create %s: %s\n", dir,
			              strerror(errno));
			break;
		}
	}
	if (*made_root)
		rmdir(root);
	return false;
}

/* A take folder whose job wrote nothing goes again, and the root when the take made it. */
void sb_take_folder_remove(const char *dir, bool made_root)
{
	if (rmdir(dir) != 0 || !made_root)
		return;
	char root[SB_TEXT];
	snprintf(root, sizeof root, "%s", dir);
	char *slash = strrchr(root, '/');
	if (slash && slash != root) {
		*slash = '\0';
		rmdir(root);
	}
}
