/* The registered model families (families.h). Registering one is one line here and its folder
 * in models/meson.build; the last takes any file the others do not recognise. */
#include "models/families.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern const sb_model_family sb_family_builtin;
extern const sb_model_family sb_family_roformer;
extern const sb_model_family sb_family_scnet;
extern const sb_model_family sb_family_mdx23c;
extern const sb_model_family sb_family_toy;
extern const sb_model_family sb_family_demucs;

static const sb_model_family *const families[] = {
	&sb_family_builtin,
	&sb_family_roformer,
	&sb_family_scnet,
	&sb_family_mdx23c,
#ifdef SB_TOY_FAMILY
	&sb_family_toy, /* tests only (-Dtoy_family=true) */
#endif
	&sb_family_demucs, /* last: any other model file */
};

#define N_FAMILIES (sizeof families / sizeof families[0])

const sb_model_family *sb_model_family_of_file(const char *path)
{
	for (size_t i = 0; i + 1 < N_FAMILIES; i++)
		if (families[i]->recognise(path))
			return families[i];
	return families[N_FAMILIES - 1];
}

const sb_model_family *sb_model_family_of_catalog(const char *family)
{
	for (size_t i = 0; i < N_FAMILIES; i++)
		for (const char *const *c = families[i]->catalog; c && *c; c++)
			if (!strcmp(*c, family ? family : ""))
				return families[i];
	return NULL;
}

int sb_model_family_installed(const sb_model_family *f, const char *name,
                              const char *const *search_path)
{
	if (f->installed)
		return f->installed(name, search_path);
	if (strchr(name, '/') || strstr(name, "..") || strlen(name) > 200)
		return 0;
	char dirs[16][4096];
	const size_t n = sb_model_dirs(search_path, dirs, 16);
	for (size_t i = 0; i < n; i++) {
		char path[4352];
		snprintf(path, sizeof path, "%s/%s.safetensors", dirs[i], name);
		if (access(path, R_OK) == 0 && (!f->recognise || f->recognise(path)))
			return 1;
	}
	return 0;
}
