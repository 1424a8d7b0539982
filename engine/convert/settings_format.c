/* Float repr follows Python's float_repr_style 'short' (David Gay's shortest round trip):
 * fixed notation for decimal exponents -4..15, scientific otherwise, and ".0" on integers. */
#include "convert/settings_format.h"

#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sbc_format_double(double v, char *buf, size_t len)
{
	if (isnan(v)) {
		snprintf(buf, len, "nan");
		return;
	}
	if (isinf(v)) {
		snprintf(buf, len, "%sinf", v < 0 ? "-" : "");
		return;
	}
	char e[40];
	int prec = 1;
	for (; prec <= 17; prec++) {
		snprintf(e, sizeof e, "%.*e", prec - 1, v);
		if (strtod(e, NULL) == v)
			break;
	}
	const char *ep = strchr(e, 'e');
	int exp10 = ep ? atoi(ep + 1) : 0;
	if (exp10 >= -4 && exp10 < 16) {
		int decimals = prec - 1 - exp10;
		snprintf(buf, len, "%.*f", decimals > 0 ? decimals : 0, v);
		if (!strchr(buf, '.') && strlen(buf) + 3 <= len)
			strcat(buf, ".0");
	} else {
		/* "1.5e+16", "1e-05": C's %e has Python's two-digit exponent already */
		snprintf(buf, len, "%s", e);
	}
}

static int64_t gcd64(int64_t a, int64_t b)
{
	a = a < 0 ? -a : a;
	b = b < 0 ? -b : b;
	while (b) {
		int64_t r = a % b;
		a = b;
		b = r;
	}
	return a;
}

static char *fraction_str(int64_t num, int64_t den)
{
	if (den < 0)
		num = -num, den = -den;
	int64_t g = gcd64(num, den);
	if (g > 1)
		num /= g, den /= g;
	char buf[64];
	if (den == 1)
		snprintf(buf, sizeof buf, "%" PRId64, num);
	else
		snprintf(buf, sizeof buf, "%" PRId64 "/%" PRId64, num, den);
	return strdup(buf);
}

/* Fraction's string forms: "39/5", "-3", "7.8", "7.8e-1", with spaces around. */
static int parse_fraction(const char *s, size_t len, int64_t *num, int64_t *den)
{
	char buf[64];
	while (len && (*s == ' ' || *s == '\t'))
		s++, len--;
	while (len && (s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	if (!len || len >= sizeof buf)
		return 0;
	memcpy(buf, s, len);
	buf[len] = '\0';
	const char *p = buf;
	int neg = 0;
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	int64_t n = 0, d = 1;
	int digits = 0;
	const int64_t lim = INT64_MAX / 10 - 10;
	for (; *p >= '0' && *p <= '9'; p++, digits++) {
		if (n > lim)
			return 0;
		n = n * 10 + (*p - '0');
	}
	if (*p == '/') {
		p++;
		int64_t q = 0;
		int qd = 0;
		for (; *p >= '0' && *p <= '9'; p++, qd++) {
			if (q > lim)
				return 0;
			q = q * 10 + (*p - '0');
		}
		if (!digits || !qd || *p || q == 0)
			return 0;
		d = q;
	} else {
		if (*p == '.')
			for (p++; *p >= '0' && *p <= '9'; p++, digits++) {
				if (n > lim || d > lim)
					return 0;
				n = n * 10 + (*p - '0');
				d *= 10;
			}
		if (!digits)
			return 0;
		if (*p == 'e' || *p == 'E') {
			char *end;
			long x = strtol(p + 1, &end, 10);
			if (end == p + 1 || *end || x > 18 || x < -18)
				return 0;
			for (; x > 0; x--) {
				if (n > lim)
					return 0;
				n *= 10;
			}
			for (; x < 0; x++) {
				if (d > lim)
					return 0;
				d *= 10;
			}
			p = end;
		}
		if (*p)
			return 0;
	}
	*num = neg ? -n : n;
	*den = d;
	return 1;
}

/* fractions.Fraction(...) as pickled: (str,) by Python < 3.12's __reduce__, (num, den) ints
 * by later ones. */
static char *format_fraction(const sbc_pk *args, char *why, size_t whylen)
{
	int64_t num, den;
	if (args->n == 1 && args->items[0]->type == SBC_PK_STR &&
	    parse_fraction(args->items[0]->s, args->items[0]->len, &num, &den))
		return fraction_str(num, den);
	if (args->n == 1 && args->items[0]->type == SBC_PK_INT)
		return fraction_str(args->items[0]->i, 1);
	if (args->n == 2 && args->items[0]->type == SBC_PK_INT &&
	    args->items[1]->type == SBC_PK_INT && args->items[1]->i != 0 &&
	    args->items[0]->i != INT64_MIN && args->items[1]->i != INT64_MIN)
		return fraction_str(args->items[0]->i, args->items[1]->i);
	snprintf(why, whylen, "a Fraction whose arguments are not understood");
	return NULL;
}

static char *format_scalar(const sbc_pk *v, int in_list, char *why, size_t whylen)
{
	char buf[64];
	switch (v->type) {
	case SBC_PK_NONE:
		return strdup("none");
	case SBC_PK_BOOL:
		return strdup(v->i ? "true" : "false");
	case SBC_PK_INT:
		snprintf(buf, sizeof buf, "%" PRId64, v->i);
		return strdup(buf);
	case SBC_PK_FLOAT:
		sbc_format_double(v->f, buf, sizeof buf);
		return strdup(buf);
	case SBC_PK_STR:
		if (memchr(v->s, '\0', v->len)) {
			snprintf(why, whylen, "a string with a NUL in it");
			return NULL;
		}
		if (in_list && memchr(v->s, ',', v->len)) {
			snprintf(why, whylen, "a list whose item '%.*s' has a comma",
			         (int)(v->len > 40 ? 40 : v->len), v->s);
			return NULL;
		}
		return strndup(v->s, v->len);
	case SBC_PK_CALL:
		if (sbc_pk_is_global(v->a, "fractions", "Fraction"))
			return format_fraction(v->b, why, whylen);
		break;
	default:
		break;
	}
	char what[160];
	sbc_pk_describe(v, what, sizeof what);
	snprintf(why, whylen, "%s%s", in_list ? "a list holding " : "", what);
	return NULL;
}

char *sbc_format_setting(const sbc_pk *v, char *why, size_t whylen)
{
	if (v->type != SBC_PK_LIST && v->type != SBC_PK_TUPLE)
		return format_scalar(v, 0, why, whylen);
	size_t cap = 64, used = 0;
	char *out = malloc(cap);
	if (!out) {
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	out[0] = '\0';
	for (size_t k = 0; k < v->n; k++) {
		char *item = format_scalar(v->items[k], 1, why, whylen);
		if (!item) {
			free(out);
			return NULL;
		}
		size_t n = strlen(item);
		if (used + n + 2 > cap) {
			while (used + n + 2 > cap)
				cap *= 2;
			char *grown = realloc(out, cap);
			if (!grown) {
				free(item);
				free(out);
				snprintf(why, whylen, "out of memory");
				return NULL;
			}
			out = grown;
		}
		if (k)
			out[used++] = ',';
		memcpy(out + used, item, n + 1);
		used += n;
		free(item);
	}
	return out;
}
