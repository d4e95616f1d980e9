/*
 * launcher_probe — a container for the launcher tests.  It prints what the
 * launcher set up, or misbehaves on purpose:
 *   launcher_probe [info]            pid, ids, cwd, hostname, env, fds, …
 *   launcher_probe exit N            exit with code N
 *   launcher_probe tree N            ignore SIGTERM, fork N children that do
 *                                    the same, print "ready PID…", wait
 *   launcher_probe forkbomb N        try N forks, print "forked K", exit
 *   launcher_probe alloc MIB         touch MIB MiB of memory, print "done"
 *   launcher_probe lines N BYTES     print N lines of BYTES 'x' on stdout
 *                                    and one line on stderr
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int info(void)
{
	char buf[4096];
	printf("pid %d\nppid %d\npgid %d\nsid %d\n", (int)getpid(),
	       (int)getppid(), (int)getpgid(0), (int)getsid(0));
	printf("uid %d\ngid %d\n", (int)getuid(), (int)getgid());
	gid_t g[64];
	int n = getgroups(64, g);
	printf("groups");
	for (int i = 0; i < n; i++)
		printf(" %d", (int)g[i]);
	printf("\n");
	if (getcwd(buf, sizeof buf))
		printf("cwd %s\n", buf);
	if (gethostname(buf, sizeof buf) == 0)
		printf("hostname %s\n", buf);
	for (char **e = environ; *e; e++)
		printf("env %s\n", *e);
	struct rlimit rl;
	getrlimit(RLIMIT_NOFILE, &rl);
	printf("nofile %llu\n", (unsigned long long)rl.rlim_cur);
	struct sigaction sa;
	sigaction(SIGPIPE, NULL, &sa);
	printf("sigpipe %s\n", sa.sa_handler == SIG_IGN ? "ignored" : "default");
	/* Every signal not at its default disposition (none expected: the
	 * launcher resets ignored ones; handlers end at exec anyway). */
	printf("signondefault");
	int nd = 0;
	for (int s = 1; s < NSIG; s++)
		if (s != SIGKILL && s != SIGSTOP && sigaction(s, NULL, &sa) == 0 &&
		    sa.sa_handler != SIG_DFL) {
			printf(" %d", s);
			nd++;
		}
	printf("%s\n", nd ? "" : " none");
	sigset_t mask;
	sigprocmask(SIG_SETMASK, NULL, &mask);
	printf("sigmask %s\n", sigismember(&mask, SIGTERM) ? "blocked" : "empty");
	ssize_t l = readlink("/proc/self/fd/0", buf, sizeof buf - 1);
	if (l >= 0) {
		buf[l] = '\0';
		printf("stdin %s\n", buf);
	}
	FILE *f = fopen("/proc/self/cgroup", "r");
	while (f && fgets(buf, sizeof buf, f))
		printf("cgroup %s", buf);
	if (f)
		fclose(f);
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (de->d_name[0] == '.' || atoi(de->d_name) == dirfd(d))
			continue;
		printf("fd %s\n", de->d_name);
	}
	if (d)
		closedir(d);
	return 0;
}

static void ignore_term(void)
{
	signal(SIGTERM, SIG_IGN);
}

int main(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "info";
	if (strcmp(cmd, "info") == 0)
		return info();
	if (strcmp(cmd, "exit") == 0 && argc > 2)
		return atoi(argv[2]);
	if (strcmp(cmd, "tree") == 0 && argc > 2) {
		ignore_term();
		int n = atoi(argv[2]);
		printf("ready");
		for (int i = 0; i < n; i++) {
			pid_t p = fork();
			if (p == 0) {
				/* a grandchild of the launcher, also deaf to TERM */
				for (;;)
					pause();
			}
			printf(" %d", (int)p);
		}
		printf("\n");
		fflush(stdout);
		for (;;)
			pause();
	}
	if (strcmp(cmd, "forkbomb") == 0 && argc > 2) {
		int n = atoi(argv[2]), k = 0, err = 0;
		pid_t kids[4096];
		for (int i = 0; i < n && i < 4096; i++) {
			pid_t p = fork();
			if (p == 0) {
				for (;;)
					pause();
			}
			if (p < 0) {
				err = errno;
				continue;
			}
			kids[k++] = p;
		}
		printf("forked %d errno %d\n", k, err);
		fflush(stdout);
		for (int i = 0; i < k; i++)
			kill(kids[i], SIGKILL);
		while (wait(NULL) > 0)
			;
		return 0;
	}
	if (strcmp(cmd, "alloc") == 0 && argc > 2) {
		long mib = atol(argv[2]);
		for (long i = 0; i < mib; i++) {
			char *p = malloc(1 << 20);
			if (!p)
				return 3;
			memset(p, 1, 1 << 20);
		}
		printf("done\n");
		return 0;
	}
	if (strcmp(cmd, "lines") == 0 && argc > 3) {
		int n = atoi(argv[2]), b = atoi(argv[3]);
		char *line = malloc((size_t)b + 2);
		memset(line, 'x', (size_t)b);
		line[b] = '\n';
		line[b + 1] = '\0';
		for (int i = 0; i < n; i++)
			fputs(line, stdout);
		fprintf(stderr, "err line\n");
		free(line);
		return 0;
	}
	fprintf(stderr, "launcher_probe: unknown command %s\n", cmd);
	return 2;
}
