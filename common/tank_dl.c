/* tank_dl — libcurl and libmicrohttpd loaded on first use (contract in tank_dl.h). */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/tank_dl.h"

/* The Makefile passes the SONAMEs read from the dev packages' libraries.
 * An empty one would make dlopen return the program itself. */
#ifndef TANK_DL_CURL_SONAME
#error "TANK_DL_CURL_SONAME is set by the Makefile (readelf of the dev package's libcurl.so)"
#endif
#ifndef TANK_DL_MHD_SONAME
#error "TANK_DL_MHD_SONAME is set by the Makefile (readelf of the dev package's libmicrohttpd.so)"
#endif
_Static_assert(sizeof TANK_DL_CURL_SONAME > 1, "the build could not read libcurl's SONAME");
_Static_assert(sizeof TANK_DL_MHD_SONAME > 1, "the build could not read libmicrohttpd's SONAME");

/* One library's outcome: its handle, or why not. */
typedef struct dl_lib {
	void *h;
	const char *name;              /* what was loaded */
	const char *bad;               /* a function it lacks, or NULL */
	char why[320];
} dl_lib_t;

/* Opens the library (soname, or the test's override in env) into l;
 * false with l->why said. */
static bool dl__open(dl_lib_t *l, const char *env, const char *soname)
{
	const char *name = secure_getenv(env);

	if (!name || !*name)
		name = soname;
	l->name = name;
	if (!(l->h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) {
		const char *e = dlerror();
		snprintf(l->why, sizeof l->why, "cannot load %s: %s", name, e ? e : "dlopen failed");
		return false;
	}
	return true;
}

static void *dl__sym(dl_lib_t *l, const char *name)
{
	void *s = dlsym(l->h, name);

	if (!s && !l->bad)
		l->bad = name;
	return s;
}

/* Casting dlsym's void * to a function pointer is what POSIX asks of
 * dlsym (XSH dlsym, "Application Usage"); GCC accepts it without
 * -pedantic. */
#define DL_SYM(l, t, name, member) ((t).member = (__typeof__((t).member))dl__sym(l, #name))

/* ---- libcurl ---------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static dl_lib_t curl_lib;
static tank_curl_t curl_fns;
static int curl_rc = -ELIBACC;

static void curl__load(void)
{
	dl_lib_t *l = &curl_lib;
	tank_curl_t t = { 0 };
	CURLcode cc;

	if (!dl__open(l, "TANK_DL_CURL", TANK_DL_CURL_SONAME))
		return;
	DL_SYM(l, t, curl_global_init, global_init);
	DL_SYM(l, t, curl_easy_init, easy_init);
	DL_SYM(l, t, curl_easy_setopt, easy_setopt);
	DL_SYM(l, t, curl_easy_getinfo, easy_getinfo);
	DL_SYM(l, t, curl_easy_perform, easy_perform);
	DL_SYM(l, t, curl_easy_reset, easy_reset);
	DL_SYM(l, t, curl_easy_cleanup, easy_cleanup);
	DL_SYM(l, t, curl_easy_strerror, easy_strerror);
	DL_SYM(l, t, curl_slist_append, slist_append);
	DL_SYM(l, t, curl_slist_free_all, slist_free_all);
	DL_SYM(l, t, curl_multi_init, multi_init);
	DL_SYM(l, t, curl_multi_setopt, multi_setopt);
	DL_SYM(l, t, curl_multi_add_handle, multi_add_handle);
	DL_SYM(l, t, curl_multi_remove_handle, multi_remove_handle);
	DL_SYM(l, t, curl_multi_assign, multi_assign);
	DL_SYM(l, t, curl_multi_socket_action, multi_socket_action);
	DL_SYM(l, t, curl_multi_info_read, multi_info_read);
	DL_SYM(l, t, curl_multi_cleanup, multi_cleanup);
	if (l->bad) {
		snprintf(l->why, sizeof l->why, "cannot load %s: it has no %s", l->name, l->bad);
		return;            /* left loaded: unloading buys nothing */
	}
	/* Before any handle, once per process (libcurl's rule). */
	if ((cc = t.global_init(CURL_GLOBAL_DEFAULT)) != CURLE_OK) {
		snprintf(l->why, sizeof l->why, "cannot load %s: curl_global_init: %s",
			 l->name, t.easy_strerror(cc));
		return;
	}
	curl_fns = t;
	curl_rc = 0;
}

int tank_curl_load(const tank_curl_t **out, const char **why)
{
	pthread_once(&curl_once, curl__load);
	if (out)
		*out = curl_rc == 0 ? &curl_fns : NULL;
	if (why)
		*why = curl_rc == 0 ? "" : curl_lib.why;
	return curl_rc;
}

/* ---- libmicrohttpd ---------------------------------------------------- */

static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;
static dl_lib_t mhd_lib;
static tank_mhd_t mhd_fns;
static int mhd_rc = -ELIBACC;

static void mhd__load(void)
{
	dl_lib_t *l = &mhd_lib;
	tank_mhd_t t = { 0 };

	if (!dl__open(l, "TANK_DL_MHD", TANK_DL_MHD_SONAME))
		return;
	DL_SYM(l, t, MHD_start_daemon, start_daemon);
	DL_SYM(l, t, MHD_stop_daemon, stop_daemon);
	DL_SYM(l, t, MHD_get_daemon_info, get_daemon_info);
	DL_SYM(l, t, MHD_get_timeout, get_timeout);
	DL_SYM(l, t, MHD_run, run);
	DL_SYM(l, t, MHD_suspend_connection, suspend_connection);
	DL_SYM(l, t, MHD_resume_connection, resume_connection);
	DL_SYM(l, t, MHD_lookup_connection_value, lookup_connection_value);
	DL_SYM(l, t, MHD_get_connection_info, get_connection_info);
	DL_SYM(l, t, MHD_create_response_from_buffer, create_response_from_buffer);
	DL_SYM(l, t, MHD_create_response_from_callback, create_response_from_callback);
	DL_SYM(l, t, MHD_add_response_header, add_response_header);
	DL_SYM(l, t, MHD_queue_response, queue_response);
	DL_SYM(l, t, MHD_destroy_response, destroy_response);
	if (l->bad) {
		snprintf(l->why, sizeof l->why, "cannot load %s: it has no %s", l->name, l->bad);
		return;
	}
	mhd_fns = t;
	mhd_rc = 0;
}

int tank_mhd_load(const tank_mhd_t **out, const char **why)
{
	pthread_once(&mhd_once, mhd__load);
	if (out)
		*out = mhd_rc == 0 ? &mhd_fns : NULL;
	if (why)
		*why = mhd_rc == 0 ? "" : mhd_lib.why;
	return mhd_rc;
}
