"""Builds the sa1b package: pip install ./python (from the repository root).

The extension sa1b._sa1b is compiled together with libsa1b's sources
(../rle, ../pipeline), so nothing needs installing first but the C
libraries' Debian development packages (scripts/deps) and python3-dev.
Build-time and run-time dependency: numpy only at run time.
"""
import glob
import os
import re
import subprocess

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(HERE)
PKGS = ["libarchive", "jansson", "libturbojpeg", "libjpeg", "libpng"]
FALLBACK_LIBS = ["archive", "jansson", "turbojpeg", "jpeg", "png16"]


def version():
    with open(os.path.join(TOP, "configure.ac")) as f:
        return re.search(r"AC_INIT\(\[sa1b\], \[([^]]+)\]", f.read()).group(1)


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args, *PKGS], check=True, capture_output=True, text=True)
        return out.stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None


def rel(paths):
    return sorted(os.path.relpath(p, HERE) for p in paths)


cflags = pkg_config("--cflags") or []
libs = pkg_config("--libs")
if libs is None:
    libs = ["-l" + lib for lib in FALLBACK_LIBS]
VERSION = version()
sources = (rel(glob.glob(os.path.join(HERE, "src", "*.c"))) +
           rel(glob.glob(os.path.join(TOP, "rle", "*.c"))) +
           rel(glob.glob(os.path.join(TOP, "pipeline", "*.c"))))

ext = Extension(
    "sa1b._sa1b",
    sources=sources,
    include_dirs=[os.path.relpath(os.path.join(TOP, d), HERE) for d in ("rle", "pipeline")],
    define_macros=[("_GNU_SOURCE", None), ("_FILE_OFFSET_BITS", "64"),
                   ("PACKAGE_VERSION", '"%s"' % VERSION)],
    extra_compile_args=["-std=c11", "-pthread", "-O2"] + cflags,
    extra_link_args=["-pthread"] + libs + ["-lm"],
)

setup(
    name="sa1b",
    version=VERSION,
    description="SA-1B from Python: a faster, validated pycocotools.mask, shards as numpy views, "
                "the prefetching loader",
    packages=["sa1b"],
    ext_modules=[ext],
    install_requires=["numpy"],
    python_requires=">=3.10",  # Py_NewRef, PyModule_AddObjectRef
)
