#!/usr/bin/env python3
"""Rewrites the kernel launches of a CUDA source for the host build of the kernels.

`kernel<<<grid, block, shared, stream>>>(args)` becomes
`::terse::simt::launch(kernel, "kernel", grid, block, shared, stream)(args)`: the same call
through an ordinary function (simt.h), which g++ can parse. Everything else is copied as is, so
the host build runs the kernels' own lines. A launch is a statement: its kernel expression starts
after the previous `;`, `{`, `}` or `)` ... `{`. Usage: translate_launches.py IN.cu OUT.cpp
"""
import os
import re
import sys


def kernel_start(text, end):
    """Index where the kernel expression ending at `end` begins (after the previous statement)."""
    depth = 0
    i = end - 1
    while i >= 0:
        c = text[i]
        if c in '>)]':
            depth += 1
        elif c in '<([':
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and c in ';{}':
            break
        i -= 1
    return i + 1


def split_config(text, start):
    """The launch configuration between `<<<` at start and the matching `>>>`."""
    close = text.index('>>>', start)
    return text[start + 3:close], close + 3


def translate(text):
    out = []
    pos = 0
    for match in re.finditer(r'<<<', text):
        at = match.start()
        if at < pos:
            continue
        begin = kernel_start(text, at)
        # Whitespace and comments before the kernel's name stay where they are.
        while begin < at:
            if text[begin].isspace():
                begin += 1
            elif text.startswith('//', begin):
                begin = text.index('\n', begin) + 1
            elif text.startswith('/*', begin):
                begin = text.index('*/', begin) + 2
            else:
                break
        kernel = text[begin:at].strip()
        config, after = split_config(text, at)
        parts = [p.strip() for p in split_top_level(config)]
        while len(parts) < 4:
            parts.append('0')
        name = kernel.split("<")[0].strip()
        out.append(text[pos:begin])
        out.append('::terse::simt::launch(%s, "%s", %s)' % (kernel, name, ', '.join(parts)))
        pos = after
    out.append(text[pos:])
    return ''.join(out)


def split_top_level(config):
    parts, depth, current = [], 0, ''
    for c in config:
        if c in '([{<':
            depth += 1
        elif c in ')]}>':
            depth -= 1
        if c == ',' and depth == 0:
            parts.append(current)
            current = ''
        else:
            current += c
    parts.append(current)
    return parts


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source) as f:
        text = f.read()
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, 'w') as f:
        f.write('#line 1 "%s"\n' % source)
        f.write(translate(text))


if __name__ == '__main__':
    main()
