/*
 * pod_spec — the in-memory pod specification and its one validator.
 *
 * A pod is a named group of containers sharing one sandbox (DESIGN.md §3).
 * There is exactly one way to obtain a pod_spec_t: pod_spec_from_msgpack(),
 * which validates.  Manifests (YAML/JSON, see pod_manifest.h) and RPC
 * params (msgpack maps) both go through it, so a file and a socket client
 * can never disagree on what is valid.
 *
 * pod_spec_to_msgpack() is the canonical encoding: fixed key order, every
 * default written out, optional fields omitted when unset.  Hence
 * from_msgpack(to_msgpack(s)) == s, and two specs that mean the same pod
 * encode to the same bytes — the store hashes those bytes to tell
 * `unchanged` from `configured`.
 *
 * Ownership: a pod_spec_t and everything it points to is one tree owned by
 * whoever received it; pod_spec_free() frees the whole tree.  Nothing here
 * blocks or touches global state; user names are kept as strings and
 * resolved by the launcher (getpwnam may block on NSS).
 */
#ifndef TANK_POD_SPEC_H
#define TANK_POD_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <msgpack.h>

#include "common/kit.h"

#include "common/kit_errors.h"
#include "common/tank_err.h"
#include "pod/pod_ns.h"
#include "reconciler/rc_converge.h"

#define POD_NAME_MAX 63    /* [a-z0-9][a-z0-9-_.]{0,62} */

/* Bounds checked at apply (docs/manifest.md "Limits"): no real pod comes
 * near them, and everything that sizes memory by a count from the input
 * can rely on them.  A refusal names the field and the limit. */
#define POD_CONTAINERS_MAX 256      /* containers per pod */
#define POD_VOLUMES_MAX 1024        /* volumes per pod */
#define POD_MOUNTS_MAX 1024         /* mounts per container */
#define POD_ENV_MAX 4096            /* env entries per container */
#define POD_ARGS_MAX 4096           /* command + args per container */
#define POD_STRING_MAX KIT_STRING_MAX /* bytes of any string value (the kit's) */
#define POD_DEPS_MAX 64             /* depends_on entries per pod */
#define POD_PARAMS_MAX 256          /* params entries per pod */
/* limits.pids at most: the kernel's PID_MAX_LIMIT (64-bit), the most a
 * cgroup's pids.max takes (it refuses more with EINVAL, so a larger limit
 * would pass apply and crash-loop the container at every launch). */
#define POD_PIDS_MAX 4194304u

enum pod_restart {
	POD_RESTART_ALWAYS = 0,
	POD_RESTART_ON_FAILURE,
	POD_RESTART_NEVER,
};

#define POD_NS_ALL 0x1fu

/* Defaults (DESIGN.md §3, §4). */
#define POD_DEFAULT_BACKOFF_BASE_MS     (10u * 1000)
#define POD_DEFAULT_BACKOFF_CAP_MS      (300u * 1000)
#define POD_DEFAULT_STABLE_WINDOW_MS    (10u * 60 * 1000)
#define POD_DEFAULT_STOP_GRACE_MS       (10u * 1000)
#define POD_MAX_RETRIES_LIMIT           1000000u   /* backoff.max_retries */
/* stop.signal defaults to SIGTERM. */

/* What a dependency must reach before the pod that names it starts
 * (DESIGN.md §8): its pod has every container started (running, or
 * completed), is ready (every container ready: its readiness probe passed,
 * or it runs and has none), or has completed (every container exited 0
 * for good). */
enum pod_dep_condition {
	POD_DEP_STARTED = 0,      /* the default, as Compose's service_started */
	POD_DEP_READY,
	POD_DEP_COMPLETED,
};

typedef struct pod_dep {
	char *pod;                /* a pod name (pod_name_valid) */
	enum pod_dep_condition condition;
} pod_dep_t;

typedef struct pod_kv {
	char *key;
	char *value;
} pod_kv_t;

typedef struct pod_volume {
	char *name;
	char *host_path;          /* absolute */
} pod_volume_t;

typedef struct pod_mount {
	char *volume;             /* names one of pod_spec_t.volumes */
	size_t volume_index;      /* its index there, resolved by validation */
	char *path;               /* absolute, inside the container */
	bool read_only;
} pod_mount_t;

/* 0 in any field means "no limit". */
typedef struct pod_limits {
	uint64_t memory_bytes;
	uint64_t pids;
	uint32_t cpu_millis;      /* 1000 = one CPU; manifest `cpu: 0.5` = 500 */
} pod_limits_t;

/* Health probes (DESIGN.md §8, Kubernetes' semantics and defaults). */
enum pod_probe_kind {
	POD_PROBE_NONE = 0,
	POD_PROBE_EXEC,           /* argv run inside the container's sandbox; exit 0 = healthy */
	POD_PROBE_TCP,            /* a connect to host:port succeeds */
	POD_PROBE_HTTP,           /* GET http://host:port/path answers 2xx or 3xx */
};

/* Which probe of a container: startup holds the other two back until it
 * has passed once; readiness sets `ready`; liveness restarts. */
enum pod_probe_role {
	POD_PROBE_STARTUP = 0,
	POD_PROBE_READINESS,
	POD_PROBE_LIVENESS,
	POD_PROBE_ROLES
};

#define POD_PROBE_DEFAULT_PERIOD_MS   (10u * 1000)
#define POD_PROBE_DEFAULT_TIMEOUT_MS  1000u
#define POD_PROBE_DEFAULT_FAILURES    3u
#define POD_PROBE_THRESHOLD_MAX       1000u
#define POD_PROBE_MIN_PERIOD_MS       10u   /* tests go fast; 1 s is Kubernetes' floor */

typedef struct pod_probe {
	enum pod_probe_kind kind;     /* NONE: the container has no such probe */
	char **argv;                  /* exec: NULL-terminated, argc >= 1 */
	size_t argc;
	char *host;                   /* tcp, http: an IP literal; NULL = 127.0.0.1 */
	uint16_t port;                /* tcp, http: 1..65535 */
	char *path;                   /* http: starts with '/'; NULL = "/" */
	uint64_t initial_delay_ms;    /* 0 */
	uint64_t period_ms;           /* 10 s */
	uint64_t timeout_ms;          /* 1 s */
	uint32_t success_threshold;   /* 1 (and 1 only, for startup and liveness) */
	uint32_t failure_threshold;   /* 3 */
} pod_probe_t;

typedef struct pod_container {
	char *name;
	char **argv;              /* NULL-terminated, argc >= 1 */
	size_t argc;
	pod_kv_t *env;            /* in manifest order, keys unique */
	size_t env_count;
	char *working_dir;        /* absolute, or NULL = launcher's choice */
	/* user: the string as written ("1000:1000", "www", "www:www"), or NULL
	 * for tankd's own identity.  When a part is numeric it is also parsed
	 * here; names are resolved by the launcher. */
	char *user;
	bool has_uid, has_gid;
	uid_t uid;
	gid_t gid;
	pod_limits_t limits;
	pod_mount_t *mounts;
	size_t mount_count;
	/* By enum pod_probe_role, [POD_PROBE_ROLES] owned, or NULL when the
	 * container has no probe (most have none: inline, the three cost
	 * every container 240 bytes; issue 38, item 2).  Non-NULL means at
	 * least one has a kind.  Read with pod_container_probe. */
	pod_probe_t *probes;
} pod_container_t;


/* A custom action a pod declares (`actions: {backup: {command, approval,
 * timeout, container}}`), run by the Action kind (action/) inside the
 * container's sandbox.  Nothing that runs reads it: changing it does not
 * restart the pod (pod_spec_same_run). */
#define POD_ACTIONS_MAX 64
enum pod_approval {
	POD_APPROVAL_NONE = 0,      /* runs when its turn comes */
	POD_APPROVAL_REQUIRED,      /* waits for an approve, by anyone allowed */
	POD_APPROVAL_OTHER,         /* four-eyes: approved by another uid */
};

typedef struct pod_action_decl {
	char *name;                /* [a-z0-9][a-z0-9-_]{0,62}, no built-in kind's */
	char **argv;               /* NULL-terminated, argc >= 1 */
	size_t argc;
	char *container;           /* NULL: the pod's first */
	enum pod_approval approval;
	uint64_t timeout_ms;       /* 0: the exec default */
} pod_action_decl_t;

typedef struct pod_spec {
	char *name;
	enum pod_restart restart;
	struct {
		uint64_t base_ms, cap_ms, stable_window_ms;   /* cap >= base */
		/* Restarts in a row (since the container last ran for
		 * stable_window) before it is given up: terminal, failed.
		 * 0 = unlimited, the default. */
		uint32_t max_retries;
	} backoff;
	struct {
		int signal;
		uint64_t grace_ms;
	} stop;
	struct {
		unsigned namespaces;   /* enum pod_ns bits; 0 = host process */
		char *hostname;        /* NULL, or set with POD_NS_UTS */
		char *rootfs;          /* NULL, or absolute with POD_NS_MOUNT */
	} isolation;
	pod_volume_t *volumes;
	size_t volume_count;
	pod_container_t *containers;   /* at least one */
	size_t container_count;
	rc_wait_t reconcile_wait;
	/* Pods this one starts after and stops before, in manifest order,
	 * names unique and not its own.  Whether they exist and form no
	 * cycle is the apply's check (it sees the other pods; a spec alone
	 * cannot). */
	pod_dep_t *deps;
	size_t dep_count;
	/* The workflow that drives the pod (workflow/, DESIGN.md §10), a
	 * name as a pod's, or NULL; and the params its templates read
	 * (`{{.Param "k"}}`), string values, in manifest order.  Neither
	 * restarts anything when changed (pod_spec_same_run): the workflow's
	 * agent reads them, not the containers. */
	char *workflow;
	pod_kv_t *params;
	size_t param_count;
	/* Custom actions, in manifest order (sorted by name when encoded). */
	pod_action_decl_t *actions;
	size_t action_count;
} pod_spec_t;

/*
 * Validates a msgpack map shaped like a manifest document and builds a
 * spec from it.  Every error found is appended to errs (which may be NULL
 * when only the verdict matters), each as `<pod>: <path>: <problem>`,
 * where <pod> is the pod's name when it is valid and "spec" otherwise.
 * Unknown keys are errors at every level; nil means "absent".
 *
 * `map` is borrowed; the spec copies every string it keeps.
 * Returns 0 and sets *out (owned by the caller), or:
 *   TANK_EINVALID  the map is not a valid pod (details in errs);
 *   -ENOMEM        allocation failed (errs may be incomplete).
 * On failure *out is set to NULL.
 */
int pod_spec_from_msgpack(const msgpack_object *map, pod_spec_t **out,
			  kit_errors_t *errs);

/*
 * Canonical encoding of spec as one msgpack map (see top of file).
 * Returns 0, or the packer's write error (negative; -ENOMEM for an
 * sbuffer) — the packer may then hold a partial map.
 */
int pod_spec_to_msgpack(const pod_spec_t *spec, msgpack_packer *pk);

/* Convenience: the canonical bytes in a malloc'd buffer owned by the
 * caller.  0 or -ENOMEM. */
int pod_spec_encode(const pod_spec_t *spec, char **buf, size_t *len);

/* Decodes canonical bytes (as stored) into *out (owned by the caller).
 * TANK_ECORRUPT when buf is not one msgpack value, else as
 * pod_spec_from_msgpack; err says which. */
int pod_spec_decode(const void *buf, size_t len, pod_spec_t **out, tank_error_t *err);

/* Deep copy; NULL on ENOMEM. */
pod_spec_t *pod_spec_dup(const pod_spec_t *spec);

/* True when a and b run the same: they differ at most in fields nothing
 * that runs reads — today `reconcile_wait` (read by `apply --wait`,
 * a client) and `actions` (read by the Action kind when one is submitted).  A new generation that changes only those updates the
 * stored spec and the containers go on (docs/manifest.md, "What an
 * apply restarts").  False on ENOMEM (a restart is the safe answer). */
bool pod_spec_same_run(const pod_spec_t *a, const pod_spec_t *b);

/* Frees spec and everything it owns. NULL is fine. */
void pod_spec_free(pod_spec_t *spec);

/* True when name matches [a-z0-9][a-z0-9-_.]{0,62}; used for pod,
 * container and volume names (they become path components). */
bool pod_name_valid(const char *name, size_t len);

/* "always", "on_failure", "never". */
const char *pod_restart_name(enum pod_restart r);
/* "none", "required", "other". */
const char *pod_approval_name(enum pod_approval a);
/* The declared action called name, or NULL. */
const pod_action_decl_t *pod_spec_action(const pod_spec_t *s, const char *name);
/* Deep copy of a probe into dst (its own strings): 0, or -ENOMEM with dst
 * empty.  pod_probe_clear frees what a probe owns and empties it. */
int pod_probe_copy(pod_probe_t *dst, const pod_probe_t *src);
void pod_probe_clear(pod_probe_t *p);

/* "startup", "readiness", "liveness". */
const char *pod_probe_role_name(enum pod_probe_role r);
/* The role called name ("startup" …), or -1 (NULL or unknown: none). */
int pod_probe_role_of(const char *name);
/* True when the container has any probe (its probes array is set). */
bool pod_container_has_probes(const pod_container_t *c);
/* The container's probe of role r: never NULL (an empty one, kind NONE,
 * when it has no such probe). */
const pod_probe_t *pod_container_probe(const pod_container_t *c, enum pod_probe_role r);

/* "started", "ready", "completed". */
const char *pod_dep_condition_name(enum pod_dep_condition c);
/* "pid", "mount", "uts", "ipc", "net" for a single bit, else NULL. */
const char *pod_ns_name(unsigned bit);

#endif
