/* sim_peer.c: peer access between contexts on different devices
 * (SIMCUDA_DEVICES >= 2).  Every pair of distinct devices can access each
 * other (cuDeviceCanAccessPeer); a kernel may touch another device's
 * memory only once its context enabled access to the owner's context
 * (sim_launch.c asks sim_peer_enabled).  Copies need no peer access:
 * cuMemcpyPeer stages them itself (cuda.h). */
#include "sim_internal.h"

#define PEER_MAX 256

typedef struct peer_pair {
  const sim_ctx *ctx, *peer;
} peer_pair;

static pthread_mutex_t peer_mu = PTHREAD_MUTEX_INITIALIZER;
static peer_pair pairs[PEER_MAX];
static int npairs;

static int find_locked(const sim_ctx *c, const sim_ctx *p) {
  for (int i = 0; i < npairs; i++)
    if (pairs[i].ctx == c && pairs[i].peer == p) return i;
  return -1;
}

int sim_peer_enabled(const sim_ctx *ctx, const sim_ctx *peer) {
  pthread_mutex_lock(&peer_mu);
  int on = find_locked(ctx, peer) >= 0;
  pthread_mutex_unlock(&peer_mu);
  return on;
}

SIM_API CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
  SIM_ENTER_INIT(cuCtxEnablePeerAccess);
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  if (flags) return CUDA_ERROR_INVALID_VALUE; /* "Flags: reserved, must be 0" */
  sim_ctx *p = (sim_ctx *)peer;
  if (!p || sim_ctx_check(p) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  if (p->dev == c->dev) return CUDA_ERROR_INVALID_DEVICE; /* same device: nothing to enable */
  pthread_mutex_lock(&peer_mu);
  if (find_locked(c, p) >= 0)
    r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
  else if (npairs == PEER_MAX)
    r = CUDA_ERROR_TOO_MANY_PEERS;
  else
    pairs[npairs++] = (peer_pair){c, p};
  pthread_mutex_unlock(&peer_mu);
  return r;
}

SIM_API CUresult cuCtxDisablePeerAccess(CUcontext peer) {
  SIM_ENTER_INIT(cuCtxDisablePeerAccess);
  sim_ctx *c;
  CUresult r = sim_ctx_current(&c);
  if (r != CUDA_SUCCESS) return r;
  if (!peer || sim_ctx_check((sim_ctx *)peer) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&peer_mu);
  int i = find_locked(c, (sim_ctx *)peer);
  if (i < 0)
    r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  else
    pairs[i] = pairs[--npairs];
  pthread_mutex_unlock(&peer_mu);
  return r;
}
