/*
 * cl_cli — `tankctl --cluster URL VERB …`: the cluster's side of tankctl,
 * talking to etcd (not to a tankd) with cl_etcd.  cmd/tankctl.c hands
 * its words over when --cluster is given, and knows nothing more.
 *
 * Verbs (docs/cli.md, docs/cluster.md):
 *   apply -f FILE|-        validates every pod of the manifest (the Pod
 *                          kind's validator, node_selector apart) and
 *                          writes each to /tank/pods/NAME; one line per
 *                          pod: "pod NAME created|configured|unchanged"
 *   delete NAME…|-f FILE   deletes the pods' keys (spec, assignment,
 *                          status): their nodes stop them
 *   get NAME [-o yaml|json]  the spec as stored, with `node` and `status`
 *   ps                     NAME NODE PHASE READY RESTARTS REASON
 *   nodes                  NAME LEASE LABELS CAPACITY ASSIGNED RUNNING
 *
 * Only pods go to a cluster in this round: another kind in a manifest is
 * refused, naming it.  Exit codes as tankctl's: 0, 1 (an error: etcd
 * unreachable, not found, a refused manifest), 2 (usage).
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
