/*
 * obs_page — the live page served at / (obs/page.html), made a C string
 * at build time (the Makefile's rule for $(BUILD)/gen/obs_page_html.c),
 * so the page is edited as HTML and tankd needs no file at run time.
 */
#ifndef TANK_OBS_PAGE_H
#define TANK_OBS_PAGE_H

#include <stddef.h>

extern const char obs_page_html[];
extern const size_t obs_page_html_len;

#endif
