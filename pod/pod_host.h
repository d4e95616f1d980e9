/*
 * pod_host — what an apply can check of a pod against the host that will
 * run it, before storing it.
 *
 * pod_spec validates what a manifest says (tankctl runs it too, on any
 * machine); this checks what the paths and names in it mean on the host
 * where tankd runs them, so that a mistake is refused at apply, naming
 * the field, instead of being found by a crash loop:
 *
 *   - isolation.rootfs is a directory;
 *   - each mounted volume's host_path exists;
 *   - without a rootfs, each mount point exists on the host (the sandbox
 *     creates mount points inside a rootfs only); with one, a mount point
 *     absent from it can be made (its nearest existing ancestor is a
 *     directory, on a file system that is not read-only);
 *   - command[0] and each exec probe's exec[0] name an executable regular
 *     file, found in the container's PATH (its env's, else the launcher's
 *     default) when it has no '/';
 *   - working_dir is a directory;
 *   - user's and group's names exist in the host's passwd/group (numeric
 *     ids need no entry; names are resolved on the host, as the launcher
 *     does).
 *
 * Paths are looked up as the container will see them: inside the rootfs
 * when the pod has one (openat2 RESOLVE_IN_ROOT, so its absolute symlinks
 * stay inside it), else on the host.  Only what is certain is refused: a
 * path under a mount point (a volume, and /proc or /dev of a rootfs) is
 * not looked at, nor a PATH with a relative element, nor anything when
 * the kernel cannot resolve in a root (openat2, Linux >= 5.6).  What is
 * checked can still change before the start (a file removed later): that
 * is then a failed start, reported in the container's log and status.
 *
 * Blocks on the file system (stat-like lookups, no reads) and on NSS for
 * user names, as the launcher does at each start.  Keeps nothing.
 */
#ifndef TANK_POD_HOST_H
#define TANK_POD_HOST_H

#include "common/kit_errors.h"
#include "pod/pod_spec.h"

/* Appends each problem of s (borrowed) to errs as validation does,
 * "<pod>: <path>: <problem>", e.g.
 *   web: containers[0].command[0]: /nope: not found
 *   web: volumes[0].host_path: /srv/data: No such file or directory
 * Returns the number of problems found (0: nothing to refuse). */
size_t pod_host_check(const pod_spec_t *s, kit_errors_t *errs);

#endif
