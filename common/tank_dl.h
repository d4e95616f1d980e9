/*
 * tank_dl — the libraries tank uses only for some features, loaded with
 * dlopen when a feature first needs them, never at a program's start:
 *   libcurl        an http probe (its apply's host check, pod/pod_host.c,
 *                  and its runs, pod/pod_probe.c), cluster mode
 *                  (cluster/cl_etcd.c: `tankd --cluster`, `tankctl
 *                  --cluster`);
 *   libmicrohttpd  `tankd --http` (obs/obs_http.c).
 *
 * Why: linked, they are loaded by every tankd, every keeper and every
 * tankctl, whether or not the feature is used — libcurl alone brings 33
 * libraries (TLS, Kerberos, LDAP, ssh …) and about 6.5 ms of CPU in the
 * dynamic loader and their constructors before main, and their mapped
 * pages count in tankd's memory (docs/bench.md, "Issue 38, items 6 (a)
 * and 2, round 5").  Rejected: linking them with -Wl,--as-needed (they
 * are needed, so still loaded); a separate helper process for probes
 * (one more process and protocol for what one dlopen does).
 *
 * Each library is one table of function pointers, filled from the
 * library found by its SONAME (the one of the headers tank was built
 * with: the Makefile reads it from the dev package's library).  Its
 * headers stay a build dependency; its types and constants are used as
 * always, its functions only through the table.  The members are the
 * functions' names without their prefix: curl's header defines
 * curl_easy_setopt and others as macros (its type checks), which a
 * member of the same name would call.
 *
 * Loading.  The first call of tank_curl_load (tank_mhd_load) loads the
 * library, resolves every function of the table (RTLD_NOW: all or
 * nothing, no missing symbol found later) and, for libcurl, calls
 * curl_global_init(CURL_GLOBAL_DEFAULT) — before any handle is made, as
 * libcurl requires.  Thread-safe (pthread_once): probes load it on
 * tankd's loop thread, the node agent on the main thread before its
 * threads start, tankctl on its only one; whoever comes first loads, the
 * others wait for that load.  The outcome is kept for the process's
 * life, a failure too (one dlopen attempt: a library installed later is
 * used from tankd's next start or `tankctl daemon reexec`, which keeps
 * the pods); the library is never unloaded.  Later calls cost one pthread_once check.
 *
 * Errors: 0 and *out, the table (static, valid for the process's life);
 * or -ELIBACC and *why, "cannot load libcurl.so.4: <dlerror's text>"
 * (static, the same on every call), naming the library — callers prefix
 * what needed it.  why may be NULL.  Nothing exits or aborts.
 *
 * Tests: TANK_DL_CURL / TANK_DL_MHD in the environment replace the
 * SONAME (tests/obs/test_lazy.c loads a name that does not exist, to
 * check what the user sees then).
 */
#ifndef TANK_DL_H
#define TANK_DL_H

#include <curl/curl.h>
#include <microhttpd.h>

#define TANK_DL_FN(name, member) __typeof__(name) *member

typedef struct tank_curl {
	TANK_DL_FN(curl_global_init, global_init);
	TANK_DL_FN(curl_easy_init, easy_init);
	TANK_DL_FN(curl_easy_setopt, easy_setopt);
	TANK_DL_FN(curl_easy_getinfo, easy_getinfo);
	TANK_DL_FN(curl_easy_perform, easy_perform);
	TANK_DL_FN(curl_easy_reset, easy_reset);
	TANK_DL_FN(curl_easy_cleanup, easy_cleanup);
	TANK_DL_FN(curl_easy_strerror, easy_strerror);
	TANK_DL_FN(curl_slist_append, slist_append);
	TANK_DL_FN(curl_slist_free_all, slist_free_all);
	TANK_DL_FN(curl_multi_init, multi_init);
	TANK_DL_FN(curl_multi_setopt, multi_setopt);
	TANK_DL_FN(curl_multi_add_handle, multi_add_handle);
	TANK_DL_FN(curl_multi_remove_handle, multi_remove_handle);
	TANK_DL_FN(curl_multi_assign, multi_assign);
	TANK_DL_FN(curl_multi_socket_action, multi_socket_action);
	TANK_DL_FN(curl_multi_info_read, multi_info_read);
	TANK_DL_FN(curl_multi_cleanup, multi_cleanup);
} tank_curl_t;

typedef struct tank_mhd {
	TANK_DL_FN(MHD_start_daemon, start_daemon);
	TANK_DL_FN(MHD_stop_daemon, stop_daemon);
	TANK_DL_FN(MHD_get_daemon_info, get_daemon_info);
	TANK_DL_FN(MHD_get_timeout, get_timeout);
	TANK_DL_FN(MHD_run, run);
	TANK_DL_FN(MHD_suspend_connection, suspend_connection);
	TANK_DL_FN(MHD_resume_connection, resume_connection);
	TANK_DL_FN(MHD_lookup_connection_value, lookup_connection_value);
	TANK_DL_FN(MHD_get_connection_info, get_connection_info);
	TANK_DL_FN(MHD_create_response_from_buffer, create_response_from_buffer);
	TANK_DL_FN(MHD_create_response_from_callback, create_response_from_callback);
	TANK_DL_FN(MHD_add_response_header, add_response_header);
	TANK_DL_FN(MHD_queue_response, queue_response);
	TANK_DL_FN(MHD_destroy_response, destroy_response);
} tank_mhd_t;

/* See the top of this file.  Thread-safe; blocks for the load (a few ms)
 * on the first call only. */
int tank_curl_load(const tank_curl_t **out, const char **why);
int tank_mhd_load(const tank_mhd_t **out, const char **why);

#endif
