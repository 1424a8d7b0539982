#!/usr/bin/env python3
"""Embed a text file (OpenCL C source, JSON) in a C header as a static NUL-terminated char array.

usage: embed_text.py SYMBOL INPUT.cl OUTPUT.h

A byte array rather than a string literal: no escaping to get wrong and no limit on the
length of string literals.
"""
import os
import sys


def main():
    symbol, src, dst = sys.argv[1:4]
    data = open(src, 'rb').read() + b'\0'
    rows = ['\t' + ', '.join('0x%02x' % c for c in data[i:i + 16]) + ','
            for i in range(0, len(data), 16)]
    with open(dst, 'w') as f:
        f.write('/* Generated from %s by embed_text.py at build time; do not edit. */\n'
                % os.path.basename(src))
        f.write('static const char %s[] = {\n%s\n};\n' % (symbol, '\n'.join(rows)))


if __name__ == '__main__':
    main()
