/* The operations of backend.h by name: the table the tests walk (tests/backend/test_ops.c says
 * "not supported" for a member a backend leaves out) and the job runner asks (a model is placed
 * only on devices that have every group its family needs). An operation is one line here. */
#include "backend/backend.h"

#include <stddef.h>
#include <string.h>

#define OP(name, group) {#name, group, offsetof(sb_ops, name)}

static const sb_op_info table[] = {
	OP(gemm, SB_OPS_CORE),
	OP(zero, SB_OPS_CORE),
	OP(copy, SB_OPS_CORE),
	OP(bias_cols, SB_OPS_CORE),
	OP(add, SB_OPS_CORE),
	OP(glu, SB_OPS_CORE),
	OP(groupnorm, SB_OPS_CORE),
	OP(groupnorm_tokens, SB_OPS_CORE),
	OP(layernorm, SB_OPS_CORE),
	OP(softmax, SB_OPS_CORE),
	OP(transpose, SB_OPS_CORE),
	OP(rows_tokens, SB_OPS_CORE),
	OP(add_row_channel, SB_OPS_CORE),
	OP(attention, SB_OPS_CORE),
	OP(rmsnorm, SB_OPS_CORE),
	OP(rmsnorm_seg, SB_OPS_CORE),
	OP(rope, SB_OPS_CORE),
	OP(head_gate, SB_OPS_CORE),
	OP(stft, SB_OPS_CORE),
	OP(istft, SB_OPS_CORE),
	OP(moments, SB_OPS_CORE),
	OP(standardise, SB_OPS_CORE),
	OP(gather, SB_OPS_CORE),
	OP(cmul, SB_OPS_CORE),
	OP(gemm_bias, SB_OPS_CORE),
	OP(im2col_k8s4, SB_OPS_HTDEMUCS),
	OP(convtr_k8s4, SB_OPS_HTDEMUCS),
	OP(gn_glu_add, SB_OPS_HTDEMUCS),
	{"classic", SB_OPS_CLASSIC, (size_t)-1},
	OP(lstm, SB_OPS_LSTM),
	OP(copy_rows, SB_OPS_CONVNET),
	OP(permute, SB_OPS_CONVNET),
	OP(norm_groups, SB_OPS_CONVNET),
	OP(dwconv, SB_OPS_CONVNET),
	OP(mul, SB_OPS_CONVNET),
#ifdef SB_TOY_FAMILY
	OP(toy_mix, SB_OPS_TOY), /* tests only (-Dtoy_family=true) */
#endif
};

const sb_op_info *sb_op_at(size_t i)
{
	return i < sizeof table / sizeof table[0] ? &table[i] : NULL;
}

const sb_op_info *sb_op_find(const char *name)
{
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (!strcmp(table[i].name, name))
			return &table[i];
	return NULL;
}

const char *sb_op_group_name(sb_op_group g)
{
	switch (g) {
	case SB_OPS_CORE: return "core";
	case SB_OPS_HTDEMUCS: return "HTDemucs";
	case SB_OPS_CLASSIC: return "built-in model's";
	case SB_OPS_LSTM: return "LSTM";
	case SB_OPS_CONVNET: return "convolution nets'";
#ifdef SB_TOY_FAMILY
	case SB_OPS_TOY: return "toy";
#endif
	case SB_N_OP_GROUPS: break;
	}
	return "unknown";
}

int sb_exec_supports(const sb_exec *x, const sb_op_info *op)
{
	if (!x || !x->be || !op)
		return 0;
	const int member = op->offset == (size_t)-1
	                       ? x->be->classic != NULL
	                       : x->be->ops &&
	                             *(void *const *)((const char *)x->be->ops + op->offset) != NULL;
	return member && (!x->be->supports || x->be->supports(x->d, op));
}

int sb_exec_has_groups(const sb_exec *x, unsigned groups, sb_op_group *missing)
{
	for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
		if (table[i].group != SB_OPS_CORE && (groups & (1u << table[i].group)) &&
		    !sb_exec_supports(x, &table[i])) {
			if (missing)
				*missing = table[i].group;
			return 0;
		}
	return 1;
}
