/*
 * stack_kind — the Stack kind's descriptor (kinds/kind.h): stack/stacks/st,
 * manifest `kind: Stack`, the "stacks" collection, inline pods (applied
 * with the stack, in the same transaction), the membership rules of a
 * batch (a pod given twice, a named member that exists nowhere, a pod in
 * two stacks), its status map (stored by the manager in the answer's
 * shape), the deletion of the pods it owns, how a wait observes it, its
 * `ps` columns, its verbs `up` and `down`, its events, and its manager.
 *
 * Its instance is the stack manager (stack_mgr.h), opened after the pods'.
 */
#ifndef TANK_STACK_KIND_H
#define TANK_STACK_KIND_H

#include "kinds/kind.h"

extern const kind_t stack_kind;

#endif
