#!/usr/bin/env python3
"""Embed a text file (OpenCL C source, JSON) in a C header as a static NUL-terminated char array.

usage: embed_text.py SYMBOL INPUT.cl [INPUT.cl ...] OUTPUT.h

Several inputs are joined in order (a kernel source after the helpers it shares with another).

A byte array rather than a string literal: no escaping to get wrong and no limit on the
length of string literals.
"""
import os
import sys


def main():
    symbol, srcs, dst = sys.argv[1], sys.argv[2:-1], sys.argv[-1]
    data = b''.join(open(src, 'rb').read() for src in srcs) + b'\0'
    rows = ['\t' + ', '.join('0x%02x' % c for c in data[i:i + 16]) + ','
            for i in range(0, len(data), 16)]
    with open(dst, 'w') as f:
        f.write('/* Generated from %s by embed_text.py at build time; do not edit. */\n'
                % ' + '.join(os.path.basename(src) for src in srcs))
        f.write('static const char %s[] = {\n%s\n};\n' % (symbol, '\n'.join(rows)))


if __name__ == '__main__':
    main()
