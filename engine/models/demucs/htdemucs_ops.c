/* Host frequency tensors (htdemucs_internal.h) for the STFT side of the forward pass. */
#include "models/demucs/htdemucs_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

sb_status hd_ften_alloc(sb_htdemucs_ws *ws, hd_ften *x, int F, int C, int T)
{
	x->F = F;
	x->C = C;
	x->T = T;
	const size_t row = (size_t)C * (size_t)T;
	x->base = hd_alloc(ws, sizeof(float) * (size_t)(F + 2 * HD_FPAD) * row);
	if (!x->base)
		return SB_ERR_NOMEM;
	memset(x->base, 0, sizeof(float) * HD_FPAD * row);
	memset(hd_row(x, F), 0, sizeof(float) * HD_FPAD * row);
	return SB_OK;
}

void hd_ften_free(sb_htdemucs_ws *ws, hd_ften *x)
{
	hd_free(ws, x->base);
	x->base = NULL;
}

