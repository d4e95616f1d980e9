/*
 * pod_methods — the Pod kind's RPC methods of its own (kind_method_t),
 * walked by api/ by name like any kind's:
 *
 *   running  []                     {name: pid} of the running pods
 *   restart  [name]                 answered once the loop stored it
 *   logs     [name, {container?, tail?, since?, until?, follow?}]
 *
 * `logs` reads the files pod_log writes; with follow, the answer is
 * followed by [2, "log", [{container, line}…]] notifications from an
 * actor that polls the files, and [2, "log_end", []] once the pod has
 * ended and its log is drained (docs/rpc.md).  Everything runs on the
 * runtime's thread; the reads block on the disk only.
 */
#ifndef TANK_POD_METHODS_H
#define TANK_POD_METHODS_H

#include <stddef.h>

#include "kinds/kind.h"

#define POD_LOG_TAIL_DEFAULT 100
#define POD_LOG_TAIL_MAX 100000

#define POD_NMETHODS 3
extern const kind_method_t pod_methods[POD_NMETHODS];

#endif
