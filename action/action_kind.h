/*
 * action_kind — the Action and Playbook kinds' descriptors (kinds/kind.h),
 * their RPC methods and tankctl commands (docs/actions.md):
 *   action_submit [{id?, pod, kind, args?, approve_first?}]
 *   action_approve [id]      action_cancel [id]      action_get [id]
 *   action_list [{pod?, state?}]
 *   action_output [id, {offset?, max?}]
 *   playbook_apply [{name, stages}]   playbook_get [name]   playbook_list []
 * tankctl: `action run|approve|cancel|get|ls`, `exec`, `playbook
 * apply|get|ls` (action_cli.c).
 */
#ifndef TANK_ACTION_KIND_H
#define TANK_ACTION_KIND_H

#include "kinds/kind.h"

extern const kind_t action_kind;
extern const kind_t playbook_kind;

/* action_cli.c: the commands of the two kinds. */
#define ACTION_NCMDS 2
#define PLAYBOOK_NCMDS 1
extern const kind_cmd_t action_cmds[ACTION_NCMDS];
extern const kind_cmd_t playbook_cmds[PLAYBOOK_NCMDS];

#endif
