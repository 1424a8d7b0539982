/* Fuzz target: a whole checkpoint as `stembridge-convert` and the model installer read it
 * (zip, pickle, torch's tensor rebuild, the Demucs package: class, settings, every tensor
 * resolved and bounds-checked). */
#include "fuzz_common.h"

#include "convert/demucs_package.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_as_file(data, size);
	if (!path)
		return 0;
	sbc_package *p = NULL;
	char err[256];
	if (sbc_package_open(path, NULL, &p, err, sizeof err) == SB_OK) {
		(void)sbc_package_klass(p);
		for (size_t i = 0; i < sbc_package_n_settings(p); i++)
			(void)sbc_package_setting_at(p, i);
		for (size_t i = 0; i < sbc_package_n_tensors(p); i++)
			(void)sbc_package_tensor_at(p, i);
		sbc_package_free(p);
	}
	return 0;
}
