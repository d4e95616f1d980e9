#include <criterion/criterion.h>

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "common/tank_err.h"
#include "manifest/mf_doc.h"
#include "pod/pod_spec.h"

/* Validates the single YAML document `yaml`; returns every error message
 * joined by '\n' (caller frees), or NULL when the spec is valid (then
 * *out, if given, receives it). */
static char *check(const char *yaml, pod_spec_t **out)
{
	kit_errors_t errs;
	mf_docs_t *docs = NULL;
	pod_spec_t *spec = NULL;
	char *joined = NULL;
	int r;

	kit_errors_init(&errs);
	r = mf_docs_load(yaml, strlen(yaml), "t.yaml", &docs, &errs);
	cr_assert_eq(r, 0, "YAML did not load: %s", errs.stored ? errs.msgs[0] : "?");
	cr_assert_eq(docs->count, 1);
	r = pod_spec_from_msgpack(&docs->docs[0], &spec, &errs);
	if (r == 0) {
		cr_assert_eq(errs.count, 0);
		cr_assert_not_null(spec);
		if (out)
			*out = spec;
		else
			pod_spec_free(spec);
	} else {
		cr_assert_eq(r, TANK_EINVALID);
		cr_assert_null(spec);
		cr_assert_gt(errs.count, 0);
		joined = kit_errors_join(&errs);
		cr_assert_not_null(joined);
	}
	kit_errors_free(&errs);
	mf_docs_free(docs);
	return joined;
}

/* Asserts that yaml is rejected with exactly the message `want`. */
static void reject(const char *yaml, const char *want)
{
	char *got = check(yaml, NULL);

	cr_assert_not_null(got, "accepted: %s", yaml);
	cr_assert_str_eq(got, want, "for:\n%s\ngot:\n%s", yaml, got);
	free(got);
}

static void valid(const char *yaml)
{
	char *got = check(yaml, NULL);
	cr_assert_null(got, "rejected: %s\n%s", yaml, got ? got : "");
}

#define C0 "containers: [{name: app, command: [/bin/true]}]\n"

Test(podspec, defaults)
{
	pod_spec_t *s = NULL;
	const pod_container_t *c;

	cr_assert_null(check("name: web\n" C0, &s));
	cr_assert_str_eq(s->name, "web");
	cr_assert_eq(s->restart, POD_RESTART_ALWAYS);
	cr_assert_eq(s->backoff.base_ms, 10000);
	cr_assert_eq(s->backoff.cap_ms, 300000);
	cr_assert_eq(s->backoff.stable_window_ms, 600000);
	cr_assert_eq(s->stop.signal, SIGTERM);
	cr_assert_eq(s->stop.grace_ms, 10000);
	cr_assert_eq(s->isolation.namespaces, 0);
	cr_assert_null(s->isolation.hostname);
	cr_assert_null(s->isolation.rootfs);
	cr_assert_eq(s->volume_count, 0);
	cr_assert_eq(s->reconcile_wait.kind, RC_WAIT_STATIC);
	cr_assert_eq(s->reconcile_wait.wait_ms, 3000);
	cr_assert_eq(s->container_count, 1);
	c = &s->containers[0];
	cr_assert_str_eq(c->name, "app");
	cr_assert_eq(c->argc, 1);
	cr_assert_str_eq(c->argv[0], "/bin/true");
	cr_assert_null(c->argv[1]);
	cr_assert_eq(c->env_count, 0);
	cr_assert_null(c->working_dir);
	cr_assert_null(c->user);
	cr_assert_eq(c->limits.memory_bytes, 0);
	cr_assert_eq(c->limits.pids, 0);
	cr_assert_eq(c->limits.cpu_millis, 0);
	pod_spec_free(s);
}

Test(podspec, full_spec_fields)
{
	pod_spec_t *s = NULL;
	const pod_container_t *c;

	cr_assert_null(check(
		"name: web\n"
		"restart: on_failure\n"
		"backoff: {base: 0, cap: 1m, stable_window: 2h}\n"
		"stop: {signal: SIGINT, grace: 2500}\n"
		"isolation: {namespaces: [pid, mount, uts, ipc, net], hostname: web-1, rootfs: /srv/root}\n"
		"volumes: [{name: data, host_path: /srv/data}, {name: cache, host_path: /tmp}]\n"
		"containers:\n"
		"  - name: app\n"
		"    command: [/usr/bin/python3, -m, http.server, \"8080\"]\n"
		"    env: {PORT: \"8080\", A: b, EMPTY: \"\"}\n"
		"    working_dir: /srv\n"
		"    user: \"1000:1001\"\n"
		"    limits: {memory: 64Mi, pids: 64, cpu: 0.5}\n"
		"    mounts: [{volume: cache, path: /cache}, {volume: data, path: /data, read_only: true}]\n"
		"  - name: side\n"
		"    command: [sleep, infinity]\n"
		"    user: www\n"
		"    limits: {cpu: \"250m\"}\n"
		"reconcile_wait: {exponential: {wait: 2s, multiplier: 10}}\n", &s));
	cr_assert_eq(s->restart, POD_RESTART_ON_FAILURE);
	cr_assert_eq(s->backoff.base_ms, 0);
	cr_assert_eq(s->backoff.cap_ms, 60000);
	cr_assert_eq(s->backoff.stable_window_ms, 7200000);
	cr_assert_eq(s->stop.signal, SIGINT);
	cr_assert_eq(s->stop.grace_ms, 2500);
	cr_assert_eq(s->isolation.namespaces, POD_NS_ALL);
	cr_assert_str_eq(s->isolation.hostname, "web-1");
	cr_assert_str_eq(s->isolation.rootfs, "/srv/root");
	cr_assert_eq(s->volume_count, 2);
	cr_assert_str_eq(s->volumes[1].host_path, "/tmp");
	c = &s->containers[0];
	cr_assert_eq(c->argc, 4);
	cr_assert_str_eq(c->argv[3], "8080");
	cr_assert_eq(c->env_count, 3);
	cr_assert_str_eq(c->env[0].key, "PORT");
	cr_assert_str_eq(c->env[0].value, "8080");
	cr_assert_str_eq(c->env[1].key, "A");
	cr_assert_str_eq(c->env[2].value, "");
	cr_assert_str_eq(c->working_dir, "/srv");
	cr_assert_str_eq(c->user, "1000:1001");
	cr_assert(c->has_uid && c->has_gid);
	cr_assert_eq(c->uid, 1000);
	cr_assert_eq(c->gid, 1001);
	cr_assert_eq(c->limits.memory_bytes, 64ull << 20);
	cr_assert_eq(c->limits.pids, 64);
	cr_assert_eq(c->limits.cpu_millis, 500);
	cr_assert_eq(c->mount_count, 2);
	cr_assert_str_eq(c->mounts[0].volume, "cache");
	cr_assert_eq(c->mounts[0].volume_index, 1);
	cr_assert_eq(c->mounts[0].read_only, false);
	cr_assert_eq(c->mounts[1].volume_index, 0);
	cr_assert_eq(c->mounts[1].read_only, true);
	c = &s->containers[1];
	cr_assert_str_eq(c->user, "www");
	cr_assert(!c->has_uid && !c->has_gid);
	cr_assert_eq(c->limits.cpu_millis, 250);
	cr_assert_eq(s->reconcile_wait.kind, RC_WAIT_EXPONENTIAL);
	cr_assert_eq(s->reconcile_wait.wait_ms, 2000);
	cr_assert_float_eq(s->reconcile_wait.multiplier, 10.0, 1e-12);
	pod_spec_free(s);
}

Test(podspec, required_fields)
{
	reject("restart: never\n" C0, "spec: name: required");
	reject("name: web\n", "web: containers: required");
	reject("name: web\ncontainers: []\n", "web: containers: must not be empty");
	reject("name: web\ncontainers: [{name: a, command: [x]}, {name: b}]\n",
	       "web: containers[1].command: required");
	reject("name: web\ncontainers: [{command: [x]}]\n",
	       "web: containers[0].name: required");
	reject("name: web\ncontainers: [{name: a, command: []}]\n",
	       "web: containers[0].command: must not be empty");
	reject("name: web\ncontainers: [{name: a, command: [\"\"]}]\n",
	       "web: containers[0].command[0]: must not be empty");
	reject("name: web\ncontainers: [{name: a, command: /bin/true}]\n",
	       "web: containers[0].command: must be a list of strings, not a string");
	reject("name: web\ncontainers: [{name: a, command: [x, 8080]}]\n",
	       "web: containers[0].command[1]: must be a string, not an integer");
	/* nil is absence */
	reject("name: web\ncontainers: [{name: a, command: ~}]\n",
	       "web: containers[0].command: required");
}

Test(podspec, names)
{
	reject("name: Web\n" C0,
	       "spec: name: invalid name \"Web\": must match [a-z0-9][a-z0-9-_.]{0,62}");
	reject("name: -web\n" C0,
	       "spec: name: invalid name \"-web\": must match [a-z0-9][a-z0-9-_.]{0,62}");
	reject("name: 42\n" C0, "spec: name: must be a string, not an integer");
	reject("name: web\ncontainers: [{name: a/b, command: [x]}]\n",
	       "web: containers[0].name: invalid name \"a/b\": must match [a-z0-9][a-z0-9-_.]{0,62}");
	reject("name: web\ncontainers: [{name: app, command: [x]}, {name: app, command: [y]}]\n",
	       "web: containers[1].name: duplicate \"app\"");
	valid("name: a\n" C0);
	valid("name: 0a-b_c.d\n" C0);
	/* 63 characters is the limit */
	valid("name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n" C0);
	reject("name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n" C0,
	       "spec: name: invalid name \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": "
	       "must match [a-z0-9][a-z0-9-_.]{0,62}");
	cr_assert(pod_name_valid("web", 3));
	cr_assert(!pod_name_valid("", 0));
	cr_assert(!pod_name_valid("a b", 3));
	cr_assert(!pod_name_valid(".a", 2));
}

Test(podspec, unknown_keys_at_every_level)
{
	reject("name: web\ncontianers: []\n",
	       "web: unknown key \"contianers\"\nweb: containers: required");
	reject("contianers: []\n",
	       "spec: name: required\nspec: unknown key \"contianers\"\nspec: containers: required");
	reject("name: web\nbackoff: {bse: 1s}\n" C0, "web: backoff: unknown key \"bse\"");
	reject("name: web\nstop: {sig: TERM}\n" C0, "web: stop: unknown key \"sig\"");
	reject("name: web\nisolation: {ns: [pid]}\n" C0, "web: isolation: unknown key \"ns\"");
	reject("name: web\nvolumes: [{name: d, host_path: /d, ro: true}]\n" C0,
	       "web: volumes[0]: unknown key \"ro\"");
	reject("name: web\ncontainers: [{name: a, command: [x], args: [y]}]\n",
	       "web: containers[0]: unknown key \"args\"");
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {mem: 1}}]\n",
	       "web: containers[0].limits: unknown key \"mem\"");
	reject("name: web\nisolation: {namespaces: [mount]}\nvolumes: [{name: d, host_path: /d}]\n"
	       "containers: [{name: a, command: [x], mounts: [{volume: d, path: /d, rw: true}]}]\n",
	       "web: containers[0].mounts[0]: unknown key \"rw\"");
	reject("name: web\nreconcile_wait: {random: {min: 1s, max: 2s, avg: 1s}}\n" C0,
	       "web: reconcile_wait.random: unknown key \"avg\"");
	reject("name: web\n1: x\n" C0, "web: keys must be strings, not an integer");
}

Test(podspec, restart_policy)
{
	pod_spec_t *s = NULL;

	cr_assert_null(check("name: web\nrestart: never\n" C0, &s));
	cr_assert_eq(s->restart, POD_RESTART_NEVER);
	pod_spec_free(s);
	valid("name: web\nrestart: always\n" C0);
	valid("name: web\nrestart: on_failure\n" C0);
	reject("name: web\nrestart: sometimes\n" C0,
	       "web: restart: invalid value \"sometimes\": must be one of always, on_failure, never");
	reject("name: web\nrestart: true\n" C0,
	       "web: restart: must be a string, not a boolean");
}

Test(podspec, backoff_and_durations)
{
	reject("name: web\nbackoff: {base: 10s, cap: 5s}\n" C0,
	       "web: backoff.cap: must be >= base");
	/* The default cap (300s) applies when only base is given. */
	reject("name: web\nbackoff: {base: 10m}\n" C0, "web: backoff.cap: must be >= base");
	valid("name: web\nbackoff: {base: 0, cap: 0}\n" C0);
	valid("name: web\nbackoff: {base: 5s, cap: 5s}\n" C0);
	reject("name: web\nbackoff: {base: 10x}\n" C0, "web: backoff.base: invalid duration \"10x\"");
	/* An invalid side is reported once, not also as a comparison. */
	reject("name: web\nbackoff: {base: 10x, cap: 1s}\n" C0,
	       "web: backoff.base: invalid duration \"10x\"");
	reject("name: web\nbackoff: {base: -5}\n" C0,
	       "web: backoff.base: invalid duration -5: must not be negative");
	reject("name: web\nbackoff: {stable_window: 1.5}\n" C0,
	       "web: backoff.stable_window: invalid duration 1.5: use an integer of ms or a unit (250ms, 10s, 5m, 1h)");
	reject("name: web\nstop: {grace: [1]}\n" C0,
	       "web: stop.grace: must be a duration (250ms, 10s, 5m, 1h or integer ms), not a list");
	reject("name: web\nstop: {grace: 99999999999999999h}\n" C0,
	       "web: stop.grace: invalid duration \"99999999999999999h\": too large");
	reject("name: web\nbackoff: 10s\n" C0, "web: backoff: must be a map, not a string");
}

Test(podspec, stop_signal)
{
	pod_spec_t *s = NULL;

	cr_assert_null(check("name: web\nstop: {signal: 9}\n" C0, &s));
	cr_assert_eq(s->stop.signal, SIGKILL);
	pod_spec_free(s);
	cr_assert_null(check("name: web\nstop: {signal: SIGQUIT}\n" C0, &s));
	cr_assert_eq(s->stop.signal, SIGQUIT);
	pod_spec_free(s);
	valid("name: web\nstop: {signal: USR2}\n" C0);
	valid("name: web\nstop: {signal: hup}\n" C0);
	reject("name: web\nstop: {signal: TERMINATE}\n" C0,
	       "web: stop.signal: unknown signal \"TERMINATE\"");
	reject("name: web\nstop: {signal: 0}\n" C0, "web: stop.signal: unknown signal 0");
	reject("name: web\nstop: {signal: -15}\n" C0, "web: stop.signal: unknown signal -15");
	reject("name: web\nstop: {signal: 1000}\n" C0, "web: stop.signal: unknown signal 1000");
	reject("name: web\nstop: {signal: true}\n" C0,
	       "web: stop.signal: must be a signal name or number, not a boolean");
}

Test(podspec, isolation_rules)
{
	reject("name: web\nisolation: {namespaces: [pid, user]}\n" C0,
	       "web: isolation.namespaces[1]: unknown namespace \"user\": must be one of pid, mount, uts, ipc, net");
	reject("name: web\nisolation: {namespaces: [pid, pid]}\n" C0,
	       "web: isolation.namespaces[1]: duplicate \"pid\"");
	reject("name: web\nisolation: {namespaces: pid}\n" C0,
	       "web: isolation.namespaces: must be a list, not a string");
	reject("name: web\nisolation: {hostname: web}\n" C0,
	       "web: isolation.hostname: requires the uts namespace");
	reject("name: web\nisolation: {namespaces: [uts], hostname: \"bad host\"}\n" C0,
	       "web: isolation.hostname: invalid hostname \"bad host\"");
	reject("name: web\nisolation: {namespaces: [mount], rootfs: srv/root}\n" C0,
	       "web: isolation.rootfs: must be an absolute path");
	reject("name: web\nisolation: {namespaces: [pid], rootfs: /srv/root}\n" C0,
	       "web: isolation.rootfs: requires the mount namespace");
	valid("name: web\nisolation: {namespaces: [uts, mount], hostname: h, rootfs: /r}\n" C0);
	valid("name: web\nisolation: {}\n" C0);
}

Test(podspec, volumes_and_mounts)
{
#define ISO "isolation: {namespaces: [mount]}\n"
	reject("name: web\n" ISO "volumes: [{name: data, host_path: /d}]\n"
	       "containers: [{name: a, command: [x], mounts: [{volume: dta, path: /data}]}]\n",
	       "web: containers[0].mounts[0].volume: unknown volume \"dta\"");
	reject("name: web\n" ISO "volumes: [{name: data, host_path: /d}, {name: data, host_path: /e}]\n" C0,
	       "web: volumes[1].name: duplicate \"data\"");
	reject("name: web\nvolumes: [{name: data, host_path: d}]\n" C0,
	       "web: volumes[0].host_path: must be an absolute path");
	reject("name: web\nvolumes: [{name: data}]\n" C0, "web: volumes[0].host_path: required");
	reject("name: web\nvolumes: [{host_path: /d}]\n" C0, "web: volumes[0].name: required");
	reject("name: web\nvolumes: [{name: Data, host_path: /d}]\n" C0,
	       "web: volumes[0].name: invalid name \"Data\": must match [a-z0-9][a-z0-9-_.]{0,62}");
	reject("name: web\n" ISO "volumes: [{name: data, host_path: /d}]\n"
	       "containers: [{name: a, command: [x], mounts: [{volume: data, path: data}]}]\n",
	       "web: containers[0].mounts[0].path: must be an absolute path");
	reject("name: web\n" ISO "volumes: [{name: data, host_path: /d}]\n"
	       "containers: [{name: a, command: [x], mounts: [{volume: data}]}]\n",
	       "web: containers[0].mounts[0].path: required");
	reject("name: web\n" ISO "volumes: [{name: data, host_path: /d}]\n"
	       "containers: [{name: a, command: [x], mounts: [{volume: data, path: /x}, {volume: data, path: /x}]}]\n",
	       "web: containers[0].mounts[1].path: duplicate \"/x\"");
	reject("name: web\n" ISO "volumes: [{name: data, host_path: /d}]\n"
	       "containers: [{name: a, command: [x], mounts: [{volume: data, path: /x, read_only: yes}]}]\n",
	       "web: containers[0].mounts[0].read_only: must be a boolean, not a string");
	reject("name: web\nvolumes: [{name: data, host_path: /d}]\n"
	       "containers: [{name: a, command: [x], mounts: [{volume: data, path: /x}]}]\n",
	       "web: containers[0].mounts: requires the mount namespace (isolation.namespaces)");
#undef ISO
}

Test(podspec, container_fields)
{
	reject("name: web\ncontainers: [{name: a, command: [x], working_dir: srv}]\n",
	       "web: containers[0].working_dir: must be an absolute path");
	reject("name: web\ncontainers: [{name: a, command: [x], env: {PORT: 8080}}]\n",
	       "web: containers[0].env.PORT: must be a string, not an integer (quote it)");
	reject("name: web\ncontainers: [{name: a, command: [x], env: {\"A=B\": c}}]\n",
	       "web: containers[0].env: invalid variable name \"A=B\"");
	reject("name: web\ncontainers: [{name: a, command: [x], env: [A]}]\n",
	       "web: containers[0].env: must be a map of strings, not a list");
	reject("name: web\ncontainers: [{name: a, command: [x], user: \"1000:\"}]\n",
	       "web: containers[0].user: invalid user \"1000:\": must be \"uid[:gid]\" or \"name[:group]\"");
	reject("name: web\ncontainers: [{name: a, command: [x], user: \"a b\"}]\n",
	       "web: containers[0].user: invalid user \"a b\": must be \"uid[:gid]\" or \"name[:group]\"");
	reject("name: web\ncontainers: [{name: a, command: [x], user: \"4294967295\"}]\n",
	       "web: containers[0].user: invalid user \"4294967295\": must be \"uid[:gid]\" or \"name[:group]\"");
	valid("name: web\ncontainers: [{name: a, command: [x], user: 0}]\n");
	valid("name: web\ncontainers: [{name: a, command: [x], user: \"nobody:nogroup\"}]\n");
	valid("name: web\ncontainers: [{name: a, command: [x], user: \"www:33\"}]\n");
}

Test(podspec, limits)
{
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {memory: 64Q}}]\n",
	       "web: containers[0].limits.memory: invalid size \"64Q\"");
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {memory: 0}}]\n",
	       "web: containers[0].limits.memory: must be > 0 (omit it for no limit)");
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {pids: 0}}]\n",
	       "web: containers[0].limits.pids: must be > 0 (omit it for no limit)");
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {pids: 4194305}}]\n",
	       "web: containers[0].limits.pids: must be at most 4194304 (the kernel's pids.max)");
	valid("name: web\ncontainers: [{name: a, command: [x], limits: {pids: 4194304}}]\n");
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {pids: \"64\"}}]\n",
	       "web: containers[0].limits.pids: must be an integer, not a string");
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {cpu: 0.0001}}]\n",
	       "web: containers[0].limits.cpu: must be between 0.001 and 4294967");
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {cpu: 0.1234}}]\n",
	       "web: containers[0].limits.cpu: invalid cpu 0.1234: at most 3 decimals");
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {cpu: -1}}]\n",
	       "web: containers[0].limits.cpu: must be a number of CPUs, not an integer");
	reject("name: web\ncontainers: [{name: a, command: [x], limits: {cpu: half}}]\n",
	       "web: containers[0].limits.cpu: invalid cpu \"half\": use a number of CPUs (0.5) or millicores (\"500m\")");
	valid("name: web\ncontainers: [{name: a, command: [x], limits: {memory: 1048576, pids: 1, cpu: 2}}]\n");
}

Test(podspec, reconcile_wait_forms)
{
	pod_spec_t *s = NULL;

	cr_assert_null(check("name: web\nreconcile_wait: {random: {min: 1s, max: 10s}}\n" C0, &s));
	cr_assert_eq(s->reconcile_wait.kind, RC_WAIT_RANDOM);
	cr_assert_eq(s->reconcile_wait.min_ms, 1000);
	cr_assert_eq(s->reconcile_wait.max_ms, 10000);
	pod_spec_free(s);
	cr_assert_null(check("name: web\nreconcile_wait: {static: 500ms}\n" C0, &s));
	cr_assert_eq(s->reconcile_wait.kind, RC_WAIT_STATIC);
	cr_assert_eq(s->reconcile_wait.wait_ms, 500);
	pod_spec_free(s);
	cr_assert_null(check("name: web\nreconcile_wait: 5s\n" C0, &s));
	cr_assert_eq(s->reconcile_wait.wait_ms, 5000);
	pod_spec_free(s);
	cr_assert_null(check("name: web\nreconcile_wait: {exponential: {wait: 1s}}\n" C0, &s));
	cr_assert_float_eq(s->reconcile_wait.multiplier, 2.0, 1e-12);
	pod_spec_free(s);
	reject("name: web\nreconcile_wait: {random: {min: 5s, max: 1s}}\n" C0,
	       "web: reconcile_wait.random.max: must be >= min");
	reject("name: web\nreconcile_wait: {random: {min: 5s}}\n" C0,
	       "web: reconcile_wait.random.max: required");
	reject("name: web\nreconcile_wait: {static: 1s, random: {min: 1s, max: 2s}}\n" C0,
	       "web: reconcile_wait: must have exactly one of static, random, exponential");
	reject("name: web\nreconcile_wait: {}\n" C0,
	       "web: reconcile_wait: must have exactly one of static, random, exponential");
	reject("name: web\nreconcile_wait: {exponential: {wait: 1s, multiplier: 0.5}}\n" C0,
	       "web: reconcile_wait.exponential.multiplier: must be between 1 and 1000000");
	reject("name: web\nreconcile_wait: {exponential: {multiplier: 3}}\n" C0,
	       "web: reconcile_wait.exponential.wait: required");
}

Test(podspec, all_errors_reported_at_once)
{
	char *got = check(
		"name: web\n"
		"restart: maybe\n"
		"backoff: {base: 10s, cap: 5s}\n"
		"bogus: 1\n"
		"volumes: [{name: data, host_path: /d}]\n"
		"containers:\n"
		"  - name: app\n"
		"    command: [x]\n"
		"    limits: {memory: 64Q}\n"
		"    mounts: [{volume: dta, path: /data}]\n"
		"  - name: app\n"
		"    working_dir: rel\n", NULL);

	cr_assert_not_null(got);
	cr_assert_str_eq(got,
		"web: unknown key \"bogus\"\n"
		"web: restart: invalid value \"maybe\": must be one of always, on_failure, never\n"
		"web: backoff.cap: must be >= base\n"
		"web: containers[0].limits.memory: invalid size \"64Q\"\n"
		"web: containers[0].mounts: requires the mount namespace (isolation.namespaces)\n"
		"web: containers[0].mounts[0].volume: unknown volume \"dta\"\n"
		"web: containers[1].name: duplicate \"app\"\n"
		"web: containers[1].command: required\n"
		"web: containers[1].working_dir: must be an absolute path");
	free(got);
}

Test(podspec, not_a_map)
{
	kit_errors_t e;
	pod_spec_t *s = (pod_spec_t *)1;
	msgpack_object o = { .type = MSGPACK_OBJECT_ARRAY };

	kit_errors_init(&e);
	cr_assert_eq(pod_spec_from_msgpack(&o, &s, &e), TANK_EINVALID);
	cr_assert_null(s);
	cr_assert_eq(e.count, 1);
	cr_assert_str_eq(e.msgs[0], "spec: must be a map, not a list");
	kit_errors_free(&e);
	/* errs may be NULL when only the verdict matters */
	cr_assert_eq(pod_spec_from_msgpack(&o, &s, NULL), TANK_EINVALID);
}

/* Builds "name: big\n<list key>: [e, e, …]" with n copies of elem. */
static char *big_list(const char *head, const char *elem, unsigned n, const char *tail)
{
	size_t el = strlen(elem), cap = strlen(head) + strlen(tail) + (el + 2) * n + 16;
	char *s = malloc(cap), *p = s;
	p += sprintf(p, "%s", head);
	for (unsigned i = 0; i < n; i++)
		p += sprintf(p, i ? ", %s" : "%s", elem);
	sprintf(p, "%s", tail);
	return s;
}

/* The poison pill: a pod of 30,000 containers (whose status once
 * overflowed a stack array in tankd at every start) and every other
 * count and length are bounded at apply, the limit named. */
Test(podspec, counts_and_lengths_are_bounded)
{
	char *y, *got;
	char elem[64];

	/* Names are unique per container, so build them by hand. */
	size_t cap = 30000 * 48 + 64;
	y = malloc(cap);
	char *p = y + sprintf(y, "name: big\ncontainers: [");
	for (int i = 0; i < 30000; i++)
		p += sprintf(p, "%s{name: c%d, command: [x]}", i ? ", " : "", i);
	sprintf(p, "]\n");
	got = check(y, NULL);
	cr_assert_not_null(got);
	cr_assert_str_eq(got, "big: containers: 30000 items, limit 256");
	free(got);
	free(y);

	y = big_list("name: a\ncontainers: [{name: c, command: [", "x", 5000, "]}]\n");
	reject(y, "a: containers[0].command: 5000 arguments, limit 4096");
	free(y);

	snprintf(elem, sizeof elem, "{volume: v, path: /d}");
	y = big_list("name: a\nisolation: {namespaces: [mount]}\n"
		     "volumes: [{name: v, host_path: /tmp}]\n"
		     "containers: [{name: c, command: [x], mounts: [", elem, 1025, "]}]\n");
	reject(y, "a: containers[0].mounts: 1025 mounts, limit 1024");
	free(y);

	size_t n = 70000;
	y = malloc(n + 128);
	p = y + sprintf(y, "name: a\ncontainers: [{name: c, command: [x, \"");
	memset(p, 'a', n);
	sprintf(p + n, "\"]}]\n");
	reject(y, "a: containers[0].command[1]: 70000 bytes, limit 65536");
	free(y);
}

/* backoff.max_retries: 1 .. 1,000,000, absent = unlimited; kept through the
 * canonical encoding only when set (the bytes of other pods stay). */
Test(podspec, backoff_max_retries)
{
	pod_spec_t *s = NULL;
	char *err = check("name: web\nbackoff: {max_retries: 3}\n" C0, &s);
	cr_assert_null(err, "%s", err);
	cr_assert_eq(s->backoff.max_retries, 3);
	pod_spec_free(s);
	err = check("name: web\n" C0, &s);
	cr_assert_null(err, "%s", err);
	cr_assert_eq(s->backoff.max_retries, 0);
	pod_spec_free(s);
	reject("name: web\nbackoff: {max_retries: 0}\n" C0,
	       "web: backoff.max_retries: must be an integer from 1 to 1000000 (leave it out: unlimited)");
	reject("name: web\nbackoff: {max_retries: -1}\n" C0,
	       "web: backoff.max_retries: must be an integer from 1 to 1000000 (leave it out: unlimited)");
	reject("name: web\nbackoff: {max_retries: 3s}\n" C0,
	       "web: backoff.max_retries: must be an integer from 1 to 1000000 (leave it out: unlimited)");
}

/* depends_on: a list of {pod, condition}; condition defaults to started;
 * names valid, unique and not the pod's own.  Whether they exist is the
 * apply's check (tests/e2e/test_deps.c). */
Test(podspec, depends_on)
{
	pod_spec_t *s = NULL;
	char *err = check("name: web\ndepends_on: [{pod: db, condition: ready}, {pod: init, "
			  "condition: completed}, {pod: cache}]\n" C0, &s);
	cr_assert_null(err, "%s", err);
	cr_assert_eq(s->dep_count, 3);
	cr_assert_str_eq(s->deps[0].pod, "db");
	cr_assert_eq(s->deps[0].condition, POD_DEP_READY);
	cr_assert_eq(s->deps[1].condition, POD_DEP_COMPLETED);
	cr_assert_eq(s->deps[2].condition, POD_DEP_STARTED, "the default");
	pod_spec_free(s);
	valid("name: web\ndepends_on: []\n" C0);
	reject("name: web\ndepends_on: [{pod: web}]\n" C0,
	       "web: depends_on[0].pod: a pod cannot depend on itself");
	reject("name: web\ndepends_on: [{pod: db}, {pod: db, condition: ready}]\n" C0,
	       "web: depends_on[1].pod: duplicate \"db\"");
	reject("name: web\ndepends_on: [{pod: db, condition: healthy}]\n" C0,
	       "web: depends_on[0].condition: invalid value \"healthy\": must be one of "
	       "started, ready, completed");
	reject("name: web\ndepends_on: [{condition: ready}]\n" C0,
	       "web: depends_on[0].pod: required");
	reject("name: web\ndepends_on: [{pod: Db}]\n" C0,
	       "web: depends_on[0].pod: invalid name \"Db\": must match [a-z0-9][a-z0-9-_.]{0,62}");
	reject("name: web\ndepends_on: [{pod: db, after: 3}]\n" C0,
	       "web: depends_on[0]: unknown key \"after\"");
	reject("name: web\ndepends_on: db\n" C0,
	       "web: depends_on: must be a list, not a string");
}

/* Probes: exactly one of exec, tcp, http, with Kubernetes' defaults. */
Test(podspec, probes)
{
	pod_spec_t *s = NULL;
	char *err = check("name: web\ncontainers:\n  - name: a\n    command: [x]\n"
			  "    readiness: {http: {port: 8080, path: /healthz}}\n"
			  "    liveness: {tcp: {port: 8080, host: 10.0.0.1}, period: 5s}\n"
			  "    startup: {exec: [test, -f, /up], failure_threshold: 30}\n", &s);
	cr_assert_null(err, "%s", err);
	const pod_probe_t *r = pod_container_probe(&s->containers[0], POD_PROBE_READINESS);
	cr_assert_eq(r->kind, POD_PROBE_HTTP);
	cr_assert_eq(r->port, 8080);
	cr_assert_str_eq(r->path, "/healthz");
	cr_assert_null(r->host, "127.0.0.1 by default");
	cr_assert_eq(r->period_ms, 10000);
	cr_assert_eq(r->timeout_ms, 1000);
	cr_assert_eq(r->initial_delay_ms, 0);
	cr_assert_eq(r->success_threshold, 1);
	cr_assert_eq(r->failure_threshold, 3);
	const pod_probe_t *l = pod_container_probe(&s->containers[0], POD_PROBE_LIVENESS);
	cr_assert_eq(l->kind, POD_PROBE_TCP);
	cr_assert_str_eq(l->host, "10.0.0.1");
	cr_assert_eq(l->period_ms, 5000);
	const pod_probe_t *st = pod_container_probe(&s->containers[0], POD_PROBE_STARTUP);
	cr_assert_eq(st->kind, POD_PROBE_EXEC);
	cr_assert_eq(st->argc, 3);
	cr_assert_eq(st->failure_threshold, 30);
	pod_spec_free(s);

#define P(x) "name: web\ncontainers:\n  - name: a\n    command: [x]\n    " x "\n"
	reject(P("readiness: {period: 1s}"),
	       "web: containers[0].readiness: must have exactly one of exec, tcp, http");
	reject(P("readiness: {exec: [x], tcp: {port: 1}}"),
	       "web: containers[0].readiness: must have exactly one of exec, tcp, http");
	reject(P("liveness: {exec: []}"), "web: containers[0].liveness.exec: must not be empty");
	reject(P("liveness: {tcp: {port: 70000}}"),
	       "web: containers[0].liveness.tcp.port: must be a port number from 1 to 65535");
	reject(P("liveness: {tcp: {}}"), "web: containers[0].liveness.tcp.port: required");
	reject(P("liveness: {tcp: {port: 80, host: db.local}}"),
	       "web: containers[0].liveness.tcp.host: invalid address \"db.local\": must be an "
	       "IP address (names are not resolved)");
	reject(P("readiness: {http: {port: 80, path: healthz}}"),
	       "web: containers[0].readiness.http.path: must start with '/'");
	reject(P("readiness: {tcp: {port: 80, path: /x}}"),
	       "web: containers[0].readiness.tcp: unknown key \"path\"");
	reject(P("liveness: {tcp: {port: 80}, success_threshold: 2}"),
	       "web: containers[0].liveness.success_threshold: must be 1 for a liveness probe");
	reject(P("readiness: {tcp: {port: 80}, failure_threshold: 0}"),
	       "web: containers[0].readiness.failure_threshold: must be an integer from 1 to 1000");
	reject(P("readiness: {tcp: {port: 80}, period: 1ms}"),
	       "web: containers[0].readiness.period: must be at least 10ms");
	reject(P("readiness: {tcp: {port: 80}, timeout: 0}"),
	       "web: containers[0].readiness.timeout: must be at least 1ms");
	reject(P("health: {tcp: {port: 80}}"), "web: containers[0]: unknown key \"health\"");
#undef P
}

/* A container without probes holds no probe array (issue 38, item 2: the
 * three inline cost every container 240 bytes); one with a probe holds
 * all three, and both read the same through pod_container_probe and
 * survive the canonical bytes (pod_spec_dup goes through them). */
Test(podspec, probes_only_where_declared)
{
	pod_spec_t *s = NULL, *d = NULL;
	char *err = check("name: web\ncontainers:\n  - name: a\n    command: [x]\n"
			  "  - name: b\n    command: [x]\n    readiness: null\n"
			  "  - name: c\n    command: [x]\n"
			  "    liveness: {tcp: {port: 80}, period: 5s}\n", &s);
	cr_assert_null(err, "%s", err);
	for (int k = 0; k < 2; k++) {
		const pod_spec_t *x = k ? d : s;
		cr_assert_eq(x->container_count, 3);
		for (unsigned i = 0; i < 2; i++) {
			cr_assert_null(x->containers[i].probes, "container %u: no array", i);
			cr_assert_not(pod_container_has_probes(&x->containers[i]));
			for (int r = 0; r < POD_PROBE_ROLES; r++)
				cr_assert_eq(pod_container_probe(&x->containers[i],
								 (enum pod_probe_role)r)->kind,
					     POD_PROBE_NONE);
		}
		const pod_container_t *c = &x->containers[2];
		cr_assert(pod_container_has_probes(c));
		cr_assert_eq(pod_container_probe(c, POD_PROBE_LIVENESS)->kind, POD_PROBE_TCP);
		cr_assert_eq(pod_container_probe(c, POD_PROBE_LIVENESS)->period_ms, 5000);
		cr_assert_eq(pod_container_probe(c, POD_PROBE_LIVENESS)->port, 80);
		cr_assert_eq(pod_container_probe(c, POD_PROBE_READINESS)->kind, POD_PROBE_NONE);
		cr_assert_eq(pod_container_probe(c, POD_PROBE_STARTUP)->kind, POD_PROBE_NONE);
		if (!k) {
			d = pod_spec_dup(s);
			cr_assert_not_null(d);
		}
	}
	pod_spec_free(d);
	pod_spec_free(s);
}
