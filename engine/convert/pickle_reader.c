/* The pickle virtual machine of CPython's Lib/pickle.py (`_Unpickler`) and the opcode table of
 * Lib/pickletools.py, with every call replaced by a record of the call: `find_class` yields a
 * GLOBAL node, REDUCE a CALL node, NEWOBJ/OBJ/INST an OBJECT node, BUILD attaches its state to
 * the node under it. Nothing is imported, called or looked up. */
#include "convert/pickle_reader.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STACK ((size_t)1 << 22)
#define MAX_MARKS 1000
#define CHUNK 4096

typedef struct chunk {
	struct chunk *next;
	size_t used;
	sbc_pk nodes[CHUNK];
} chunk;

struct sbc_pickle {
	chunk *chunks;
};

typedef struct {
	sbc_pickle *pk;
	const uint8_t *p, *end, *start;
	sbc_pk **stack;
	size_t sp, stack_cap;
	size_t marks[MAX_MARKS];
	size_t n_marks;
	sbc_pk **memo;
	size_t memo_cap, memo_max, memo_count;
	char *err;
	size_t errlen;
	size_t op_at;
	uint8_t op;
} vm;

static sb_status vfail(vm *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static sb_status vfail(vm *m, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(m->err, m->errlen, "malformed pickle: %s (opcode 0x%02x at byte %zu)", msg, m->op,
	         m->op_at);
	return SB_ERR_FORMAT;
}

static sbc_pk *node(vm *m, sbc_pk_type t)
{
	chunk *c = m->pk->chunks;
	if (!c || c->used == CHUNK) {
		c = calloc(1, sizeof *c);
		if (!c)
			return NULL;
		c->next = m->pk->chunks;
		m->pk->chunks = c;
	}
	sbc_pk *v = &c->nodes[c->used++];
	v->type = t;
	return v;
}

static int add_item(sbc_pk *c, sbc_pk *v)
{
	if (c->n == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 4;
		sbc_pk **items = realloc(c->items, cap * sizeof *items);
		if (!items)
			return 0;
		c->items = items;
		c->cap = cap;
	}
	c->items[c->n++] = v;
	return 1;
}

static sb_status push(vm *m, sbc_pk *v)
{
	if (!v)
		return vfail(m, "out of memory");
	if (m->sp == m->stack_cap) {
		if (m->stack_cap >= MAX_STACK)
			return vfail(m, "more than %zu values on the stack", MAX_STACK);
		size_t cap = m->stack_cap ? m->stack_cap * 2 : 64;
		sbc_pk **s = realloc(m->stack, cap * sizeof *s);
		if (!s)
			return vfail(m, "out of memory");
		m->stack = s;
		m->stack_cap = cap;
	}
	m->stack[m->sp++] = v;
	return SB_OK;
}

/* values above the top mark belong to the current frame; the rest are out of reach */
static size_t frame_base(const vm *m)
{
	return m->n_marks ? m->marks[m->n_marks - 1] : 0;
}

static sbc_pk *pop(vm *m)
{
	return m->sp > frame_base(m) ? m->stack[--m->sp] : NULL;
}

static sbc_pk *top(vm *m)
{
	return m->sp > frame_base(m) ? m->stack[m->sp - 1] : NULL;
}

/* Pops back to the last mark: the values are stack[*first .. sp), and sp is left at *first
 * so that the caller can read them before pushing anything. */
static sb_status pop_mark(vm *m, size_t *first)
{
	*first = m->sp;
	if (!m->n_marks)
		return vfail(m, "no MARK to pop to");
	*first = m->marks[--m->n_marks];
	return SB_OK;
}

static sb_status need(vm *m, size_t n)
{
	if ((size_t)(m->end - m->p) < n)
		return vfail(m, "truncated (needs %zu more bytes)", n);
	return SB_OK;
}

static uint64_t le(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int k = n - 1; k >= 0; k--)
		v = v << 8 | p[k];
	return v;
}

/* An opcode's n-byte little-endian operand, read and stepped over. */
static sb_status operand(vm *m, int n, uint64_t *v)
{
	sb_status st = need(m, (size_t)n);
	if (st != SB_OK)
		return st;
	*v = le(m->p, n);
	m->p += n;
	return SB_OK;
}

static sb_status line(vm *m, const char **s, size_t *len)
{
	*s = NULL;
	*len = 0;
	const uint8_t *nl = memchr(m->p, '\n', (size_t)(m->end - m->p));
	if (!nl)
		return vfail(m, "truncated text argument (no newline)");
	*s = (const char *)m->p;
	*len = (size_t)(nl - m->p);
	m->p = nl + 1;
	return SB_OK;
}

static int utf8_valid(const uint8_t *s, size_t n)
{
	for (size_t i = 0; i < n;) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		} else if ((c & 0xe0) == 0xc0) {
			k = 1, cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			k = 2, cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			k = 3, cp = c & 0x07;
		} else {
			return 0;
		}
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + j] & 0x3f);
		}
		if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += k + 1;
	}
	return 1;
}

/* A string argument of n bytes; text that is not valid UTF-8 is kept as bytes. */
static sb_status push_text(vm *m, uint64_t n, int unicode)
{
	if ((uint64_t)(m->end - m->p) < n)
		return vfail(m, "truncated (a %llu-byte string runs past the end)", (unsigned long long)n);
	int ok = !unicode || utf8_valid(m->p, (size_t)n);
	sbc_pk *v = node(m, ok ? (unicode ? SBC_PK_STR : SBC_PK_BYTES) : SBC_PK_BYTES);
	if (v) {
		v->s = (const char *)m->p;
		v->len = (size_t)n;
	}
	m->p += n;
	return push(m, v);
}

static sb_status push_int(vm *m, int64_t i)
{
	sbc_pk *v = node(m, SBC_PK_INT);
	if (v)
		v->i = i;
	return push(m, v);
}

/* LONG1/LONG4: little-endian two's complement; 8 bytes or fewer fit an int64 */
static sb_status push_long(vm *m, uint64_t n)
{
	if ((uint64_t)(m->end - m->p) < n)
		return vfail(m, "truncated (a %llu-byte integer runs past the end)",
		             (unsigned long long)n);
	if (n > 8) {
		sbc_pk *v = node(m, SBC_PK_BIGINT);
		if (v) {
			v->s = (const char *)m->p;
			v->len = (size_t)n;
		}
		m->p += n;
		return push(m, v);
	}
	uint64_t u = n ? le(m->p, (int)n) : 0;
	if (n && n < 8 && (m->p[n - 1] & 0x80))
		u |= ~(uint64_t)0 << (8 * n);
	m->p += n;
	return push_int(m, (int64_t)u);
}

static sb_status text_number(vm *m, int is_float)
{
	const char *s = NULL;
	size_t len;
	sb_status st = line(m, &s, &len);
	if (st != SB_OK)
		return st;
	char buf[80];
	if (len >= sizeof buf)
		return vfail(m, "number text too long");
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (len && buf[len - 1] == 'L') /* protocol 0 longs end in L */
		buf[--len] = '\0';
	char *end = NULL;
	if (is_float) {
		sbc_pk *v = node(m, SBC_PK_FLOAT);
		if (v)
			v->f = strtod(buf, &end);
		if (!len || *end)
			return vfail(m, "bad float '%s'", buf);
		return push(m, v);
	}
	if (m->op == 'I' && (!strcmp(buf, "01") || !strcmp(buf, "00"))) {
		sbc_pk *v = node(m, SBC_PK_BOOL);
		if (v)
			v->i = buf[1] == '1';
		return push(m, v);
	}
	errno = 0;
	long long i = strtoll(buf, &end, 10);
	if (!len || *end)
		return vfail(m, "bad integer '%s'", buf);
	if (errno == ERANGE) {
		sbc_pk *v = node(m, SBC_PK_BIGINT);
		if (v) {
			v->s = s;
			v->len = len;
		}
		return push(m, v);
	}
	return push_int(m, i);
}

static sb_status memo_put(vm *m, uint64_t idx)
{
	sbc_pk *v = top(m);
	if (!v)
		return vfail(m, "PUT with an empty stack");
	if (idx >= m->memo_max)
		return vfail(m, "memo index %llu out of range", (unsigned long long)idx);
	if (idx >= m->memo_cap) {
		size_t cap = m->memo_cap ? m->memo_cap : 64;
		while (cap <= idx)
			cap *= 2;
		sbc_pk **memo = realloc(m->memo, cap * sizeof *memo);
		if (!memo)
			return vfail(m, "out of memory");
		memset(memo + m->memo_cap, 0, (cap - m->memo_cap) * sizeof *memo);
		m->memo = memo;
		m->memo_cap = cap;
	}
	if (!m->memo[idx])
		m->memo_count++;
	m->memo[idx] = v;
	return SB_OK;
}

static sb_status memo_get(vm *m, uint64_t idx)
{
	if (idx >= m->memo_cap || !m->memo[idx])
		return vfail(m, "memo index %llu was never set", (unsigned long long)idx);
	return push(m, m->memo[idx]);
}

static sb_status text_index(vm *m, uint64_t *idx)
{
	const char *s = NULL;
	size_t len;
	sb_status st = line(m, &s, &len);
	if (st != SB_OK)
		return st;
	if (!len || len > 18)
		return vfail(m, "bad memo index");
	uint64_t v = 0;
	for (size_t k = 0; k < len; k++) {
		if (s[k] < '0' || s[k] > '9')
			return vfail(m, "bad memo index");
		v = v * 10 + (uint64_t)(s[k] - '0');
	}
	*idx = v;
	return SB_OK;
}

/* The memo index of a PUT or GET: text for p and g, one byte for q and h, four for r and j. */
static sb_status memo_index(vm *m, uint64_t *idx)
{
	if (m->op == 'p' || m->op == 'g')
		return text_index(m, idx);
	return operand(m, m->op == 'q' || m->op == 'h' ? 1 : 4, idx);
}

/* Collect stack[first..sp) into a container of type t and push it. */
static sb_status collect(vm *m, size_t first, sbc_pk_type t)
{
	size_t n = m->sp - first;
	if (t == SBC_PK_DICT && n % 2)
		return vfail(m, "odd number of items for a dict");
	sbc_pk *c = node(m, t);
	if (!c)
		return vfail(m, "out of memory");
	for (size_t k = first; k < m->sp; k++)
		if (!add_item(c, m->stack[k]))
			return vfail(m, "out of memory");
	m->sp = first;
	return push(m, c);
}

static sb_status push_global(vm *m, const char *mod, size_t mod_len, const char *name,
                             size_t name_len)
{
	sbc_pk *g = node(m, SBC_PK_GLOBAL);
	if (g) {
		g->s = mod;
		g->len = mod_len;
		g->s2 = name;
		g->len2 = name_len;
	}
	return push(m, g);
}

/* REDUCE: only `collections.OrderedDict()` is understood (it is how torch writes the empty
 * backward hooks, and how a state_dict's OrderedDict starts); every other call is recorded. */
static sb_status reduce(vm *m)
{
	sbc_pk *args = pop(m), *fn = pop(m);
	if (!args || !fn)
		return vfail(m, "REDUCE needs a callable and its arguments");
	if (args->type != SBC_PK_TUPLE)
		return vfail(m, "REDUCE arguments are not a tuple");
	if (sbc_pk_is_global(fn, "collections", "OrderedDict") && args->n == 0)
		return push(m, node(m, SBC_PK_DICT));
	sbc_pk *c = node(m, SBC_PK_CALL);
	if (c) {
		c->a = fn;
		c->b = args;
	}
	return push(m, c);
}

static sb_status new_object(vm *m, const sbc_pk *cls, const sbc_pk *args)
{
	sbc_pk *o = node(m, SBC_PK_OBJECT);
	if (o) {
		o->a = cls;
		o->b = args;
	}
	return push(m, o);
}

/* SETITEM(S), APPEND(S), ADDITEMS: onto the right container, or recorded on an opaque object
 * (whose class would have done something with them). */
static sb_status add_to(vm *m, size_t first, sbc_pk_type want, const char *what)
{
	if (first == 0 || m->sp < first)
		return vfail(m, "%s without a target", what);
	sbc_pk *target = m->stack[first - 1];
	if (first - 1 < frame_base(m))
		return vfail(m, "%s target is outside the current frame", what);
	if (target->type != want && target->type != SBC_PK_CALL && target->type != SBC_PK_OBJECT)
		return vfail(m, "%s onto a %s", what,
		             target->type == SBC_PK_TUPLE ? "tuple" : "value that is no container");
	if (want == SBC_PK_DICT && (m->sp - first) % 2)
		return vfail(m, "%s with an odd number of items", what);
	for (size_t k = first; k < m->sp; k++)
		if (!add_item(target, m->stack[k]))
			return vfail(m, "out of memory");
	m->sp = first;
	return SB_OK;
}

static sb_status step(vm *m, int *stop)
{
	sb_status st = SB_OK;
	size_t first = 0;
	sbc_pk *v, *w;
	uint64_t u;
	const char *s = NULL, *s2 = NULL;
	size_t len = 0, len2 = 0;
	m->op_at = (size_t)(m->p - m->start);
	m->op = *m->p++;
	switch (m->op) {
	case 0x80: /* PROTO */
		if ((st = operand(m, 1, &u)) != SB_OK)
			return st;
		if (u > 5)
			return vfail(m, "unsupported pickle protocol %u", (unsigned)u);
		return SB_OK;
	case 0x95: /* FRAME: a hint only */
		return operand(m, 8, &u);
	case '.': /* STOP */
		*stop = 1;
		return SB_OK;
	case '(': /* MARK */
		if (m->n_marks == MAX_MARKS)
			return vfail(m, "nested deeper than %d", MAX_MARKS);
		m->marks[m->n_marks++] = m->sp;
		return SB_OK;
	case '0': /* POP */
		if (m->sp > frame_base(m)) {
			m->sp--;
			return SB_OK;
		}
		return m->n_marks ? pop_mark(m, &first) : vfail(m, "POP from an empty stack");
	case '1': /* POP_MARK */
		if ((st = pop_mark(m, &first)) != SB_OK)
			return st;
		m->sp = first;
		return SB_OK;
	case '2': /* DUP */
		if (!(v = top(m)))
			return vfail(m, "DUP of an empty stack");
		return push(m, v);
	case 'N':
		return push(m, node(m, SBC_PK_NONE));
	case 0x88: /* NEWTRUE */
	case 0x89: /* NEWFALSE */
		if ((v = node(m, SBC_PK_BOOL)))
			v->i = m->op == 0x88;
		return push(m, v);
	case 'I': /* INT */
	case 'L': /* LONG */
		return text_number(m, 0);
	case 'F': /* FLOAT */
		return text_number(m, 1);
	case 'J': /* BININT */
		if ((st = operand(m, 4, &u)) != SB_OK)
			return st;
		return push_int(m, (int32_t)(uint32_t)u);
	case 'K': /* BININT1 */
	case 'M': /* BININT2 */
		if ((st = operand(m, m->op == 'K' ? 1 : 2, &u)) != SB_OK)
			return st;
		return push_int(m, (int64_t)u);
	case 0x8a: /* LONG1 */
		if ((st = operand(m, 1, &u)) != SB_OK)
			return st;
		return push_long(m, u);
	case 0x8b: /* LONG4 */
		if ((st = operand(m, 4, &u)) != SB_OK)
			return st;
		if ((int32_t)(uint32_t)u < 0)
			return vfail(m, "negative length");
		return push_long(m, u);
	case 'G': /* BINFLOAT: big-endian double */
		if ((st = need(m, 8)) != SB_OK)
			return st;
		{
			uint64_t u = 0;
			for (int k = 0; k < 8; k++)
				u = u << 8 | m->p[k];
			m->p += 8;
			double d;
			memcpy(&d, &u, sizeof d);
			if ((v = node(m, SBC_PK_FLOAT)))
				v->f = d;
			return push(m, v);
		}
	case 'S': /* STRING: a quoted repr, kept as written */
		if ((st = line(m, &s, &len)) != SB_OK)
			return st;
		if (len >= 2 && (s[0] == '\'' || s[0] == '"') && s[len - 1] == s[0])
			s++, len -= 2;
		else
			return vfail(m, "STRING argument is not quoted");
		if ((v = node(m, SBC_PK_STR)))
			v->s = s, v->len = len;
		return push(m, v);
	case 'V': /* UNICODE: raw-unicode-escape, kept as written */
		if ((st = line(m, &s, &len)) != SB_OK)
			return st;
		if ((v = node(m, SBC_PK_STR)))
			v->s = s, v->len = len;
		return push(m, v);
	case 'T': /* BINSTRING */
		if ((st = operand(m, 4, &u)) != SB_OK)
			return st;
		if ((int32_t)(uint32_t)u < 0)
			return vfail(m, "negative length");
		return push_text(m, u, 1);
	case 'U': /* SHORT_BINSTRING */
		if ((st = operand(m, 1, &u)) != SB_OK)
			return st;
		return push_text(m, u, 1);
	case 'X': /* BINUNICODE */
	case 'B': /* BINBYTES */
		if ((st = operand(m, 4, &u)) != SB_OK)
			return st;
		return push_text(m, u, m->op == 'X');
	case 0x8c: /* SHORT_BINUNICODE */
	case 'C':  /* SHORT_BINBYTES */
		if ((st = operand(m, 1, &u)) != SB_OK)
			return st;
		return push_text(m, u, m->op == 0x8c);
	case 0x8d: /* BINUNICODE8 */
	case 0x8e: /* BINBYTES8 */
	case 0x96: /* BYTEARRAY8 */
		if ((st = operand(m, 8, &u)) != SB_OK)
			return st;
		return push_text(m, u, m->op == 0x8d);
	case ')': /* EMPTY_TUPLE */
		return push(m, node(m, SBC_PK_TUPLE));
	case ']': /* EMPTY_LIST */
		return push(m, node(m, SBC_PK_LIST));
	case '}': /* EMPTY_DICT */
		return push(m, node(m, SBC_PK_DICT));
	case 0x8f: /* EMPTY_SET */
		return push(m, node(m, SBC_PK_SET));
	case 't': /* TUPLE */
	case 'l': /* LIST */
	case 'd': /* DICT */
	case 0x91: /* FROZENSET */
		if ((st = pop_mark(m, &first)) != SB_OK)
			return st;
		return collect(m, first, m->op == 't' ? SBC_PK_TUPLE
		                       : m->op == 'l' ? SBC_PK_LIST
		                       : m->op == 'd' ? SBC_PK_DICT : SBC_PK_SET);
	case 0x85: /* TUPLE1 */
	case 0x86: /* TUPLE2 */
	case 0x87: /* TUPLE3 */
		{
			size_t n = (size_t)(m->op - 0x84);
			if (m->sp < frame_base(m) + n)
				return vfail(m, "TUPLE%zu with %zu values", n, m->sp - frame_base(m));
			return collect(m, m->sp - n, SBC_PK_TUPLE);
		}
	case 'a': /* APPEND */
		if (m->sp < frame_base(m) + 2)
			return vfail(m, "APPEND without a list and a value");
		return add_to(m, m->sp - 1, SBC_PK_LIST, "APPEND");
	case 'e': /* APPENDS */
		if ((st = pop_mark(m, &first)) != SB_OK)
			return st;
		return add_to(m, first, SBC_PK_LIST, "APPENDS");
	case 's': /* SETITEM */
		if (m->sp < frame_base(m) + 3)
			return vfail(m, "SETITEM without a dict, a key and a value");
		return add_to(m, m->sp - 2, SBC_PK_DICT, "SETITEM");
	case 'u': /* SETITEMS */
		if ((st = pop_mark(m, &first)) != SB_OK)
			return st;
		return add_to(m, first, SBC_PK_DICT, "SETITEMS");
	case 0x90: /* ADDITEMS */
		if ((st = pop_mark(m, &first)) != SB_OK)
			return st;
		return add_to(m, first, SBC_PK_SET, "ADDITEMS");
	case 'c': /* GLOBAL */
		if ((st = line(m, &s, &len)) != SB_OK || (st = line(m, &s2, &len2)) != SB_OK)
			return st;
		return push_global(m, s, len, s2, len2);
	case 0x93: /* STACK_GLOBAL */
		w = pop(m);
		v = pop(m);
		if (!v || !w || v->type != SBC_PK_STR || w->type != SBC_PK_STR)
			return vfail(m, "STACK_GLOBAL needs two strings");
		return push_global(m, v->s, v->len, w->s, w->len);
	case 'R': /* REDUCE */
		return reduce(m);
	case 0x81: /* NEWOBJ */
		v = pop(m);
		w = pop(m);
		if (!v || !w || v->type != SBC_PK_TUPLE)
			return vfail(m, "NEWOBJ needs a class and an argument tuple");
		return new_object(m, w, v);
	case 0x92: /* NEWOBJ_EX: the keyword arguments are dropped */
		pop(m);
		v = pop(m);
		w = pop(m);
		if (!v || !w || v->type != SBC_PK_TUPLE)
			return vfail(m, "NEWOBJ_EX needs a class, an argument tuple and keywords");
		return new_object(m, w, v);
	case 'o': /* OBJ: MARK class args... */
		if ((st = pop_mark(m, &first)) != SB_OK)
			return st;
		if (m->sp == first)
			return vfail(m, "OBJ without a class");
		w = m->stack[first];
		if ((st = collect(m, first + 1, SBC_PK_TUPLE)) != SB_OK)
			return st;
		v = m->stack[--m->sp];
		m->sp = first;
		return new_object(m, w, v);
	case 'i': /* INST: module and name as text, MARK args... */
		if ((st = line(m, &s, &len)) != SB_OK || (st = line(m, &s2, &len2)) != SB_OK)
			return st;
		if ((st = pop_mark(m, &first)) != SB_OK)
			return st;
		if ((st = collect(m, first, SBC_PK_TUPLE)) != SB_OK)
			return st;
		v = m->stack[--m->sp];
		if ((st = push_global(m, s, len, s2, len2)) != SB_OK)
			return st;
		w = m->stack[--m->sp];
		return new_object(m, w, v);
	case 'b': /* BUILD */
		v = pop(m);
		w = top(m);
		if (!v || !w)
			return vfail(m, "BUILD needs an object and its state");
		if (w->type == SBC_PK_CALL || w->type == SBC_PK_OBJECT)
			w->state = v;
		return SB_OK; /* BUILD on a plain value is ignored, as it would set attributes only */
	case 'P': /* PERSID */
		if ((st = line(m, &s, &len)) != SB_OK)
			return st;
		if (!(w = node(m, SBC_PK_STR)))
			return vfail(m, "out of memory");
		w->s = s;
		w->len = len;
		if ((v = node(m, SBC_PK_PERSID)))
			v->a = w;
		return push(m, v);
	case 'Q': /* BINPERSID */
		if (!(w = pop(m)))
			return vfail(m, "BINPERSID of an empty stack");
		if ((v = node(m, SBC_PK_PERSID)))
			v->a = w;
		return push(m, v);
	case 'p': /* PUT */
	case 'q': /* BINPUT */
	case 'r': /* LONG_BINPUT */
		if ((st = memo_index(m, &u)) != SB_OK)
			return st;
		return memo_put(m, u);
	case 0x94: /* MEMOIZE */
		return memo_put(m, m->memo_count);
	case 'g': /* GET */
	case 'h': /* BINGET */
	case 'j': /* LONG_BINGET */
		if ((st = memo_index(m, &u)) != SB_OK)
			return st;
		return memo_get(m, u);
	case 0x82: /* EXT1 */
	case 0x83: /* EXT2 */
	case 0x84: /* EXT4 */
		return vfail(m, "the extension registry (EXT opcodes) is not supported");
	case 0x97: /* NEXT_BUFFER */
	case 0x98: /* READONLY_BUFFER */
		return vfail(m, "out-of-band buffers are not supported");
	default:
		return vfail(m, "unknown opcode");
	}
}

sb_status sbc_pickle_load(const uint8_t *data, size_t len, sbc_pickle **out, const sbc_pk **root,
                          char *err, size_t errlen)
{
	*out = NULL;
	*root = NULL;
	vm m;
	memset(&m, 0, sizeof m);
	m.pk = calloc(1, sizeof *m.pk);
	if (!m.pk) {
		snprintf(err, errlen, "out of memory");
		return SB_ERR_NOMEM;
	}
	m.p = m.start = data;
	m.end = data + len;
	m.memo_max = len; /* each PUT takes at least two bytes of the stream */
	m.err = err;
	m.errlen = errlen;
	int stop = 0;
	sb_status st = SB_OK;
	while (st == SB_OK && !stop) {
		if (m.p == m.end) {
			m.op_at = len;
			m.op = 0;
			st = vfail(&m, "ends without STOP (truncated?)");
			break;
		}
		st = step(&m, &stop);
	}
	if (st == SB_OK && (m.sp != 1 || m.n_marks))
		st = vfail(&m, "STOP with %zu values and %zu marks on the stack (expected one value)",
		           m.sp, m.n_marks);
	if (st == SB_OK)
		*root = m.stack[0];
	free(m.stack);
	free(m.memo);
	if (st != SB_OK) {
		sbc_pickle_free(m.pk);
		return st;
	}
	*out = m.pk;
	return SB_OK;
}

void sbc_pickle_free(sbc_pickle *p)
{
	if (!p)
		return;
	for (chunk *c = p->chunks; c;) {
		chunk *next = c->next;
		for (size_t k = 0; k < c->used; k++)
			free(c->nodes[k].items);
		free(c);
		c = next;
	}
	free(p);
}

int sbc_pk_is_str(const sbc_pk *v, const char *s)
{
	size_t n = strlen(s);
	return v && v->type == SBC_PK_STR && v->len == n && !memcmp(v->s, s, n);
}

int sbc_pk_is_global(const sbc_pk *v, const char *module, const char *name)
{
	size_t a = strlen(module), b = strlen(name);
	return v && v->type == SBC_PK_GLOBAL && v->len == a && v->len2 == b &&
	       !memcmp(v->s, module, a) && !memcmp(v->s2, name, b);
}

const sbc_pk *sbc_pk_get(const sbc_pk *dict, const char *key)
{
	if (!dict || dict->type != SBC_PK_DICT)
		return NULL;
	for (size_t k = dict->n; k >= 2; k -= 2)
		if (sbc_pk_is_str(dict->items[k - 2], key))
			return dict->items[k - 1];
	return NULL;
}

void sbc_pk_describe(const sbc_pk *v, char *buf, size_t len)
{
	if (!v) {
		snprintf(buf, len, "nothing");
		return;
	}
	const sbc_pk *g = v->type == SBC_PK_CALL || v->type == SBC_PK_OBJECT ? v->a : v;
	switch (v->type) {
	case SBC_PK_NONE: snprintf(buf, len, "None"); break;
	case SBC_PK_BOOL: snprintf(buf, len, "bool %s", v->i ? "True" : "False"); break;
	case SBC_PK_INT: snprintf(buf, len, "int %lld", (long long)v->i); break;
	case SBC_PK_BIGINT: snprintf(buf, len, "an int too large for 64 bits"); break;
	case SBC_PK_FLOAT: snprintf(buf, len, "float %g", v->f); break;
	case SBC_PK_STR:
		snprintf(buf, len, "str '%.*s%s'", (int)(v->len > 40 ? 40 : v->len), v->s,
		         v->len > 40 ? "..." : "");
		break;
	case SBC_PK_BYTES: snprintf(buf, len, "bytes (%zu)", v->len); break;
	case SBC_PK_TUPLE: snprintf(buf, len, "a tuple of %zu", v->n); break;
	case SBC_PK_LIST: snprintf(buf, len, "a list of %zu", v->n); break;
	case SBC_PK_SET: snprintf(buf, len, "a set of %zu", v->n); break;
	case SBC_PK_DICT: snprintf(buf, len, "a dict of %zu", v->n / 2); break;
	case SBC_PK_PERSID: snprintf(buf, len, "a persistent id"); break;
	case SBC_PK_GLOBAL:
	case SBC_PK_CALL:
	case SBC_PK_OBJECT:
		if (g && g->type == SBC_PK_GLOBAL)
			snprintf(buf, len, "%s %.*s.%.*s",
			         v->type == SBC_PK_GLOBAL ? "the global"
			         : v->type == SBC_PK_CALL ? "a call of" : "an object of",
			         (int)(g->len > 100 ? 100 : g->len), g->s,
			         (int)(g->len2 > 100 ? 100 : g->len2), g->s2);
		else
			snprintf(buf, len, "%s", v->type == SBC_PK_CALL ? "a call" : "an object");
		break;
	}
}
