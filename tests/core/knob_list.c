/* The table of knobs as the engine has it (stembridge.h: sb_knob_at), one name a line, for
 * test_knobs.py. */
#include "stembridge.h"

#include <stdio.h>

int main(void)
{
	for (size_t i = 0; sb_knob_at(i); i++)
		printf("%s\t%d\t%s\t%s\n", sb_knob_at(i)->name, sb_knob_at(i)->tests,
		       sb_knob_at(i)->owner, sb_knob_at(i)->meaning);
	return 0;
}
