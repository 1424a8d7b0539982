/* A pickle reader that runs nothing: it interprets the opcode stream (protocols 0 to 5, less
 * out-of-band buffers and the extension registry) into a tree of plain values, and records every
 * GLOBAL, REDUCE, BUILD and NEWOBJ as an opaque node that names the class or function and holds
 * its arguments. The only construction it recognises is `collections.OrderedDict()`, which
 * becomes a plain dict. Callers then read the values they want and ignore the rest.
 *
 * Bounds: the value stack, the mark stack and the memo are limited (the memo by the length of
 * the stream, since each PUT takes bytes of it), so memory is linear in the input. The tree may
 * share nodes (the memo), and a malicious stream may make it cyclic: walk it with a depth limit
 * AND a budget of nodes visited, since a node shared twice at every level gives a tree of depth
 * d 2^d paths (tests/fuzz/fuzz_pickle found it). The converter's readers only look at fixed
 * paths and flat lists.
 */
#ifndef SBC_PICKLE_READER_H
#define SBC_PICKLE_READER_H

#include "sb_common.h"

#include <stddef.h>
#include <stdint.h>

typedef enum {
	SBC_PK_NONE,
	SBC_PK_BOOL,    /* i: 0 or 1 */
	SBC_PK_INT,     /* i */
	SBC_PK_BIGINT,  /* an int that does not fit 64 bits: s/len are its little-endian bytes */
	SBC_PK_FLOAT,   /* f */
	SBC_PK_STR,     /* s/len: UTF-8 (text opcodes: as written, escapes not undone) */
	SBC_PK_BYTES,   /* s/len */
	SBC_PK_TUPLE,   /* items/n */
	SBC_PK_LIST,    /* items/n */
	SBC_PK_SET,     /* items/n */
	SBC_PK_DICT,    /* items/n: key, value, key, value... */
	SBC_PK_GLOBAL,  /* s/len: module, s2/len2: name */
	SBC_PK_CALL,    /* REDUCE: a called, b args */
	SBC_PK_OBJECT,  /* NEWOBJ, OBJ, INST: a class, b args */
	SBC_PK_PERSID   /* a persistent id (BINPERSID: the value; PERSID: a STR) */
} sbc_pk_type;

typedef struct sbc_pk sbc_pk;
struct sbc_pk {
	sbc_pk_type type;
	int64_t i;
	double f;
	const char *s, *s2;  /* point into the pickle bytes */
	size_t len, len2;
	sbc_pk **items;      /* containers; on CALL/OBJECT: items a stream appended or set */
	size_t n, cap;
	const sbc_pk *a, *b; /* CALL/OBJECT: callable or class, and its args; PERSID: the id */
	const sbc_pk *state; /* CALL/OBJECT: the last BUILD's argument, or NULL */
};

typedef struct sbc_pickle sbc_pickle;

/* Read one pickle from data[0..len) (which must outlive the result). On failure err holds one
 * line: the opcode and the offset, and what was wrong. */
sb_status sbc_pickle_load(const uint8_t *data, size_t len, sbc_pickle **out, const sbc_pk **root,
                          char *err, size_t errlen);
void sbc_pickle_free(sbc_pickle *p);

/* Helpers for reading the tree. */
int sbc_pk_is_str(const sbc_pk *v, const char *s);
int sbc_pk_is_global(const sbc_pk *v, const char *module, const char *name);
/* dict lookup by string key; the last value set wins, as in Python */
const sbc_pk *sbc_pk_get(const sbc_pk *dict, const char *key);
/* A short human description for messages: "int 3", "str 'drums'", "object of os.system". */
void sbc_pk_describe(const sbc_pk *v, char *buf, size_t len);

#endif
