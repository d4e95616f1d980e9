/*
 * pod_ns — the namespaces a pod's sandbox may unshare, as a bitmask.
 * Shared by the spec model (pod_spec.h) and the sandbox (pod_sandbox.h) so
 * a spec's isolation.namespaces passes to the sandbox unchanged.
 */
#ifndef TANK_POD_NS_H
#define TANK_POD_NS_H

enum pod_ns {
	POD_NS_PID   = 1u << 0,
	POD_NS_MOUNT = 1u << 1,
	POD_NS_UTS   = 1u << 2,
	POD_NS_IPC   = 1u << 3,
	POD_NS_NET   = 1u << 4,
};

#endif
