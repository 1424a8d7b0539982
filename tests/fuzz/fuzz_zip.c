/* Fuzz target: the zip reader of the checkpoint converter (engine/convert/zip_reader.c), which a
 * downloaded checkpoint reaches first: central directory, zip64 records, every entry read
 * (stored or inflated) with its CRC checked. */
#include "fuzz_common.h"

#include "convert/zip_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = fuzz_as_file(data, size);
	if (!path)
		return 0;
	sbc_zip *z = NULL;
	char err[256];
	if (sbc_zip_open(path, &z, err, sizeof err) != SB_OK)
		return 0;
	for (size_t i = 0; i < sbc_zip_count(z); i++) {
		const uint8_t *bytes = NULL;
		const sbc_zip_entry *e = sbc_zip_entry_at(z, i);
		if (sbc_zip_data(z, e, &bytes, err, sizeof err) == SB_OK && e->size) {
			volatile uint8_t sink = bytes[e->size - 1];
			(void)sink;
		}
	}
	sbc_zip_close(z);
	return 0;
}
