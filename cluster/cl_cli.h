/*
 * cl_cli — `tankctl --cluster URL VERB …`: the cluster's side of tankctl,
 * talking to etcd (not to a tankd) with cl_etcd.  cmd/tankctl.c hands
 * its words over when --cluster is given, and knows nothing more.
 *
 * Verbs (docs/cli.md, docs/cluster.md):
 *   apply -f FILE|-        validates every object with its kind's
 *                          validator (node_selector apart) and writes
 *                          each to /tank/<plural>/NAME; one line per
 *                          object: "KIND NAME created|configured|unchanged"
 *   delete [KIND] NAME…|KIND/NAME…|-f FILE
 *                          deletes the objects' keys (spec, assignment,
 *                          status): their nodes stop them
 *   get [KIND] NAME|KIND/NAME [-o yaml|json]
 *                          the spec as stored, with `node` and `status`
 *   ps                     NAME NODE PHASE READY RESTARTS REASON
 *   nodes                  NAME LEASE LABELS CAPACITY ASSIGNED RUNNING
 *   a kind's verb or command (kinds/kind.h: verbs, cmds), each call
 *                          routed to the node that holds its object: a
 *                          request at /tank/req/NODE/ID that the node
 *                          answers at /tank/ans/ID (cl_node.h)
 *
 * A kind whose cluster_place is KIND_PLACE_NONE is refused in a
 * manifest, naming it.  Exit codes as tankctl's: 0, 1 (an error: etcd
 * unreachable, not found, a refused manifest, a node's error answer), 2
 * (usage).
 *
 * Blocks on etcd (each request bounded by cl_etcd's timeout).  Output on
 * out, diagnostics "tankctl: VERB: …" on err.
 */
#ifndef TANK_CL_CLI_H
#define TANK_CL_CLI_H

#include <stdio.h>

/* argv[0] is the verb. */
int cl_cli_main(const char *url, int argc, char **argv, FILE *out, FILE *err);

#endif
