# man/local.mk - pages are listed by the fragment of the program they document.
