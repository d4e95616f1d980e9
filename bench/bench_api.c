/*
 * bench_api — msgpack-RPC round trips through api_server and api_client.
 *
 * A runtime thread serves a `status` method answering a status-shaped map
 * (DESIGN.md §6) of one pod; clients call it
 *   - on one connection, sequentially (latency p50/p99),
 *   - on one connection, pipelined 64 deep (throughput),
 *   - on 16 connections at once, each pipelined 64 deep.
 * QUICK=1 uses small counts.  JSON lines on stdout.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/api_client.h"
#include "api/api_server.h"
#include "tests/support/tsupport.h"   /* leaving nothing behind */

static char sock[128];

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int pack_status(msgpack_packer *pk, void *a)
{
	(void)a;
	msgpack_pack_map(pk, 7);
	api_pack_cstr(pk, "name"); api_pack_cstr(pk, "web");
	api_pack_cstr(pk, "phase"); api_pack_cstr(pk, "running");
	api_pack_cstr(pk, "reason"); msgpack_pack_nil(pk);
	api_pack_cstr(pk, "retries"); msgpack_pack_int(pk, 0);
	api_pack_cstr(pk, "restarts"); msgpack_pack_int(pk, 3);
	api_pack_cstr(pk, "since"); msgpack_pack_uint64(pk, 1763780000000ull);
	api_pack_cstr(pk, "containers");
	msgpack_pack_array(pk, 1);
	msgpack_pack_map(pk, 3);
	api_pack_cstr(pk, "name"); api_pack_cstr(pk, "app");
	api_pack_cstr(pk, "phase"); api_pack_cstr(pk, "running");
	api_pack_cstr(pk, "pid"); return msgpack_pack_int(pk, 4242);
}

static void m_status(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	(void)p; (void)ctx;
	api_reply(c->rt, c->token, pack_status, NULL);
}

static void m_quit(const api_call_t *c, const msgpack_object *p, void *ctx)
{
	(void)p; (void)ctx;
	api_reply(c->rt, c->token, NULL, NULL);
	rt_stop(c->rt);
}

static void *serve(void *rt)
{
	rt_run(rt);
	return NULL;
}

typedef struct job { long n; int depth; long done; } job_t;

static void *pipelined(void *arg)
{
	job_t *j = arg;
	api_client_t *c;
	tank_error_t e;
	long sent = 0;

	if (api_client_connect(sock, &c, &e) < 0)
		return NULL;
	while (j->done < j->n) {
		while (sent < j->n && sent - j->done < j->depth) {
			if (api_client_send(c, "status", NULL, NULL, 10000, NULL, &e) < 0)
				goto out;
			sent++;
		}
		api_incoming_t in;
		if (api_client_next(c, 10000, &in, &e) < 0)
			goto out;
		j->done += in.code == API_OK;
		api_incoming_free(&in);
	}
out:
	api_client_close(c);
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(void)
{
	int quick = getenv("QUICK") && atoi(getenv("QUICK"));
	long n = quick ? 20000 : 200000, nlat = quick ? 2000 : 20000;
	char dir[] = "/tmp/tank-bench-api-XXXXXX";
	api_method_t methods[] = { { "status", m_status, NULL }, { "quit", m_quit, NULL } };
	tank_error_t e;
	pthread_t th;

	if (!ts_mkdtemp_at(dir))
		return 1;
	snprintf(sock, sizeof sock, "%s/tank.sock", dir);
	rt_t *rt = rt_new();
	api_server_opts_t o = { .socket_path = sock, .methods = methods, .nmethods = 2 };
	if (!rt || api_server_start(rt, &o, NULL, &e) < 0) {
		fprintf(stderr, "bench_api: %s\n", e.msg);
		return 1;
	}
	pthread_create(&th, NULL, serve, rt);

	/* latency, one call at a time */
	api_client_t *c;
	if (api_client_connect(sock, &c, &e) < 0)
		return 1;
	double *lat = calloc((size_t)nlat, sizeof *lat);
	for (long i = 0; i < nlat; i++) {
		api_incoming_t in;
		double t0 = now_s();
		api_client_call(c, "status", NULL, NULL, 10000, &in, &e);
		lat[i] = (now_s() - t0) * 1e6;
		api_incoming_free(&in);
	}
	qsort(lat, (size_t)nlat, sizeof *lat, cmp_d);
	printf("{\"bench\": \"api\", \"metric\": \"status_latency_p50\", \"value\": %.1f, \"unit\": \"us\"}\n",
	       lat[nlat / 2]);
	printf("{\"bench\": \"api\", \"metric\": \"status_latency_p99\", \"value\": %.1f, \"unit\": \"us\"}\n",
	       lat[nlat * 99 / 100]);
	free(lat);

	/* one connection, pipelined */
	job_t one = { n, 64, 0 };
	double t0 = now_s();
	pipelined(&one);
	double dt = now_s() - t0;
	printf("{\"bench\": \"api\", \"metric\": \"status_rps_1conn_pipelined\", \"value\": %.0f, \"unit\": \"calls/s\"}\n",
	       one.done / dt);

	/* 16 connections */
	job_t jobs[16];
	pthread_t ths[16];
	t0 = now_s();
	for (int i = 0; i < 16; i++) {
		jobs[i] = (job_t){ n / 16, 64, 0 };
		pthread_create(&ths[i], NULL, pipelined, &jobs[i]);
	}
	long total = 0;
	for (int i = 0; i < 16; i++) {
		pthread_join(ths[i], NULL);
		total += jobs[i].done;
	}
	dt = now_s() - t0;
	printf("{\"bench\": \"api\", \"metric\": \"status_rps_16conn_pipelined\", \"value\": %.0f, \"unit\": \"calls/s\"}\n",
	       total / dt);

	api_incoming_t in;
	api_client_call(c, "quit", NULL, NULL, 10000, &in, &e);
	api_incoming_free(&in);
	api_client_close(c);
	pthread_join(th, NULL);
	rt_free(rt);
	rmdir(dir);
	return 0;
}
