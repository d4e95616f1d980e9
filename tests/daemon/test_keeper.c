/*
 * The keeper's protocol (keeper/kp_proto.h) and the adoption table
 * (pod/pod_adopt.h) on their own: fds really cross a socketpair, an offer
 * is claimed only by the exact pid and start time, tags round-trip, what
 * nobody wants is pruned and its fds closed.  The whole story (a keeper,
 * tankd killed -9, a reexec) is tests/e2e/test_adopt.c.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "keeper/kp_proto.h"
#include "pod/pod_adopt.h"

static bool fd_open(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

Test(keeper, fds_cross_the_socket_with_their_tag)
{
	int sv[2], p1[2], p2[2], got[KP_MAX_FDS];
	kp_msg_t m = { .op = KP_PUT }, r;
	char buf[8];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	cr_assert_eq(pipe(p1), 0);
	cr_assert_eq(pipe(p2), 0);
	snprintf(m.tag, sizeof m.tag, "c web/httpd 42 1234");
	int fds[2] = { p1[0], p2[0] };
	cr_assert_eq(kp_send(sv[0], &m, fds, 2, false), 0);
	cr_assert_eq(kp_recv(sv[1], &r, got), 1);
	cr_assert_eq(r.op, KP_PUT);
	cr_assert_eq(r.nfds, 2);
	cr_assert_str_eq(r.tag, "c web/httpd 42 1234");
	/* The received fds are the same pipes: what is written comes out. */
	cr_assert_eq(write(p1[1], "a", 1), 1);
	cr_assert_eq(write(p2[1], "b", 1), 1);
	cr_assert_eq(read(got[0], buf, 1), 1);
	cr_assert_eq(buf[0], 'a');
	cr_assert_eq(read(got[1], buf, 1), 1);
	cr_assert_eq(buf[0], 'b');
	/* Nothing more: the next receive would block. */
	cr_assert_eq(kp_recv(sv[1], &r, got + 0), -EAGAIN);
	close(sv[0]);
	cr_assert_eq(kp_recv(sv[1], &r, got), 0, "the peer's end reads as gone");
	for (int i = 0; i < 2; i++) {
		close(p1[i]);
		close(p2[i]);
	}
	close(got[0]);
	close(got[1]);
	close(sv[1]);
}

Test(keeper, no_keeper_in_the_environment_is_not_an_error)
{
	kp_client_t c;
	tank_error_t e;

	unsetenv(KP_ENV_FD);
	cr_assert_eq(kp_client_from_env(&c, &e), 0);
	cr_assert_eq(c.fd, -1);
	cr_assert_eq(kp_client_put(&c, "c a/b 1 2", NULL, 0), 0, "without a keeper: nothing");
	setenv(KP_ENV_FD, "1", 1);   /* stdout: not a socket we may take */
	cr_assert_lt(kp_client_from_env(&c, &e), 0);
	unsetenv(KP_ENV_FD);
}

Test(keeper, an_offer_is_claimed_only_by_its_exact_process)
{
	pod_adopt_t *a;
	pod_proc_t p;
	int pp[2];
	bool child = true;

	cr_assert_eq(pod_adopt_new(&a), 0);
	cr_assert_eq(pipe(pp), 0);
	int fds[1] = { pp[0] };
	cr_assert_eq(pod_adopt_offer_tag(a, "c web/httpd 4242 777", fds, 1), 0);
	cr_assert_lt(pod_adopt_offer_tag(a, "garbage", NULL, 0), 0);
	cr_assert_eq(pod_adopt_offers(a), 1);
	cr_assert(pod_adopt_offered(a, "web/httpd", 4242, 777));
	/* The same pid with another start time is another process. */
	cr_assert_not(pod_adopt_offered(a, "web/httpd", 4242, 778));
	cr_assert_not(pod_adopt_claim(a, "web/httpd", 4242, 778, &p, &child));
	cr_assert_not(pod_adopt_claim(a, "web/other", 4242, 777, &p, &child));
	cr_assert(pod_adopt_claim(a, "web/httpd", 4242, 777, &p, &child));
	cr_assert_eq(p.pid, 4242);
	cr_assert_eq(p.start_time, 777);
	cr_assert_eq(p.stdout_fd, pp[0]);
	cr_assert_eq(p.stderr_fd, -1);
	cr_assert_not(child, "a keeper's offer is not our child");
	cr_assert_eq(pod_adopt_offers(a), 0);
	pod_proc_close_fds(&p);
	close(pp[1]);
	pod_adopt_free(a);
}

static int forgotten;

static void forget(void *ctx, const char *tag)
{
	(void)ctx;
	cr_assert(strstr(tag, "gone/c") != NULL, "%s", tag);
	forgotten++;
}

static bool wanted(void *ctx, bool sandbox, const char *name)
{
	(void)ctx; (void)sandbox;
	return strcmp(name, "kept/c") == 0;
}

Test(keeper, what_nobody_wants_is_pruned_and_its_fds_closed)
{
	pod_adopt_t *a;
	pod_adopt_exit_t x;
	int p1[2], p2[2];
	pod_adopt_sink_t sink = { .forget = forget };

	cr_assert_eq(pod_adopt_new(&a), 0);
	pod_adopt_set_sink(a, &sink);
	cr_assert(pod_adopt_has_reaper(a));
	cr_assert_eq(pipe(p1), 0);
	cr_assert_eq(pipe(p2), 0);
	cr_assert_eq(pod_adopt_offer(a, false, "kept/c", 10, 1, p1[0], -1, true), 0);
	cr_assert_eq(pod_adopt_offer(a, false, "gone/c", 11, 1, p2[0], -1, false), 0);
	pod_adopt_prune(a, wanted, NULL);
	cr_assert_eq(forgotten, 1, "the keeper is told to forget what is dropped");
	cr_assert_eq(pod_adopt_offers(a), 1);
	cr_assert_not(fd_open(p2[0]), "a pruned offer's fd is closed");
	cr_assert(fd_open(p1[0]));
	/* An exit kept for a later watch, found by pid and start time. */
	pod_adopt_exited(a, NULL, 12, 99, 7 << 8, 1234);
	cr_assert(pod_adopt_ended(a, 12, 99, &x));
	cr_assert_eq(x.status, 7 << 8);
	cr_assert_eq(x.at_ms, 1234);
	cr_assert_not(pod_adopt_ended(a, 12, 98, NULL));
	pod_adopt_forget_exits(a);
	cr_assert_not(pod_adopt_ended(a, 12, 99, NULL));
	pod_adopt_free(a);
	cr_assert_not(fd_open(p1[0]), "an offer never claimed is closed with the table");
	close(p1[1]);
	close(p2[1]);
}

/* pod_adopt_proc_offers counts the containers' and sandboxes' offers
 * only (a counter of the execs' kept beside the map: every pod request
 * asks it while the manager settles), through replacing, claiming and
 * dropping an exec's offer. */
Test(keeper, offers_left_to_adopt_do_not_count_execs)
{
	pod_adopt_t *a;
	pod_proc_t p;
	bool child;
	int rd;

	cr_assert_eq(pod_adopt_new(&a), 0);
	cr_assert_eq(pod_adopt_proc_offers(a), 0);
	cr_assert_eq(pod_adopt_offer(a, false, "web/c", 20, 5, -1, -1, false), 0);
	cr_assert_eq(pod_adopt_offer(a, true, "web", 21, 5, -1, -1, false), 0);
	cr_assert_eq(pod_adopt_offer_exec(a, "web/c", 30, 5, -1, false), 0);
	cr_assert_eq(pod_adopt_offer_exec(a, "web/c", 30, 5, -1, false), 0);  /* replaces */
	cr_assert_eq(pod_adopt_offer_tag(a, "x web/c 31 5", NULL, 0), 0);
	cr_assert_eq(pod_adopt_offers(a), 4);
	cr_assert_eq(pod_adopt_proc_offers(a), 2);
	cr_assert(pod_adopt_claim_exec(a, "web/c", 30, 5, &rd, &child));
	cr_assert_not(pod_adopt_claim_exec(a, "web/c", 30, 5, &rd, &child));
	cr_assert_eq(pod_adopt_proc_offers(a), 2);
	cr_assert(pod_adopt_claim(a, "web/c", 20, 5, &p, &child));
	cr_assert_eq(pod_adopt_proc_offers(a), 1);
	pod_adopt_forget_exits(a);          /* drops the exec offer left */
	cr_assert_eq(pod_adopt_offers(a), 1);
	cr_assert_eq(pod_adopt_proc_offers(a), 1);
	pid_t pid;
	uint64_t start;
	cr_assert(pod_adopt_claim_sandbox(a, "web", &pid, &start));
	cr_assert_eq(pod_adopt_proc_offers(a), 0);
	cr_assert_eq(pod_adopt_offers(a), 0);
	pod_adopt_free(a);
}

static int offers_seen;

static void count_offer(void *ctx, bool sandbox, const char *name, const pod_proc_t *p)
{
	(void)ctx; (void)sandbox; (void)p;
	cr_assert_str_eq(name, "web/c");
	offers_seen++;
}

/* A child offered by a reexec's handover, reaped by the runtime before
 * its container claimed it: its exit is recorded with its real status
 * (it read "exit status unknown"), and its offer is handed on to a next
 * reexec with that exit, where one gone with its end unknown is not. */
Test(keeper, a_child_reaped_before_its_claim_keeps_its_status)
{
	pod_adopt_t *a;
	pod_adopt_exit_t x;
	pid_t pid = fork();

	cr_assert_geq(pid, 0);
	if (pid == 0)
		_exit(7);
	uint64_t start = 0;
	for (int i = 0; i < 500 && pod_proc_start_time(pid, &start) < 0; i++)
		usleep(1000);
	cr_assert_gt(start, 0);
	int status;
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert_eq(pod_adopt_new(&a), 0);
	cr_assert_eq(pod_adopt_offer(a, false, "web/c", pid, start, -1, -1, true), 0);
	cr_assert_eq(pod_adopt_offer(a, false, "web/d", pid + 1000000, 5, -1, -1, false), 0);
	offers_seen = 0;
	pod_adopt_each_offer(a, count_offer, NULL);
	cr_assert_eq(offers_seen, 0, "a dead offer with no known end is handed on");
	cr_assert_not(pod_adopt_reaped(a, pid + 1000000, 0, 1));   /* not a child's */
	cr_assert(pod_adopt_reaped(a, pid, status, 1234));
	cr_assert_not(pod_adopt_reaped(a, pid, status, 1234));     /* once */
	cr_assert(pod_adopt_ended(a, pid, start, &x));
	cr_assert_eq(x.status, status);
	cr_assert_eq(x.at_ms, 1234);
	pod_adopt_each_offer(a, count_offer, NULL);
	cr_assert_eq(offers_seen, 1);
	pod_adopt_forget_exits(a);
	cr_assert_not(pod_adopt_ended(a, pid, start, NULL));
	pod_adopt_free(a);
}
