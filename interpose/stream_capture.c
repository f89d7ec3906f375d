/* Stream-capture hooks: each capture the application begins or ends is
 * reported to tiers/capture.c, which keeps the table vx's own calls obey. */
#include "capture.h"
#include "vx.h"

/* Every mode counts: cuCtxSynchronize and the legacy stream conflict with
 * a relaxed capture too, so vx's rule does not depend on the mode. */
static CUresult began(int on, CUresult r, CUstream s, int ptsz) {
  if (on && r == CUDA_SUCCESS) vx_capture_began(s, ptsz);
  return r;
}

CUresult cuStreamBeginCapture(CUstream hStream) {
  VX_ENTER(on);
  return began(on, VX_CALL(cuStreamBeginCapture, hStream), hStream,
               VX_HOOK_PTDS(cuStreamBeginCapture));
}

CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
  VX_ENTER(on);
  return began(on, VX_CALL(cuStreamBeginCapture_ptsz, hStream), hStream,
               VX_HOOK_PTDS(cuStreamBeginCapture_ptsz));
}

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
  VX_ENTER(on);
  return began(on, VX_CALL(cuStreamBeginCapture_v2, hStream, mode), hStream,
               VX_HOOK_PTDS(cuStreamBeginCapture_v2));
}

CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
  VX_ENTER(on);
  return began(on, VX_CALL(cuStreamBeginCapture_v2_ptsz, hStream, mode), hStream,
               VX_HOOK_PTDS(cuStreamBeginCapture_v2_ptsz));
}

CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                     const CUgraphNode *dependencies,
                                     const CUgraphEdgeData *dependencyData, size_t numDependencies,
                                     CUstreamCaptureMode mode) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuStreamBeginCaptureToGraph, hStream, hGraph, dependencies, dependencyData,
                       numDependencies, mode);
  return began(on, r, hStream, VX_HOOK_PTDS(cuStreamBeginCaptureToGraph));
}

CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          const CUgraphEdgeData *dependencyData,
                                          size_t numDependencies, CUstreamCaptureMode mode) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuStreamBeginCaptureToGraph_ptsz, hStream, hGraph, dependencies,
                       dependencyData, numDependencies, mode);
  return began(on, r, hStream, VX_HOOK_PTDS(cuStreamBeginCaptureToGraph_ptsz));
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuStreamEndCapture, hStream, phGraph);
  if (on) vx_capture_ended(hStream, VX_HOOK_PTDS(cuStreamEndCapture), r);
  return r;
}

CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) {
  VX_ENTER(on);
  CUresult r = VX_CALL(cuStreamEndCapture_ptsz, hStream, phGraph);
  if (on) vx_capture_ended(hStream, VX_HOOK_PTDS(cuStreamEndCapture_ptsz), r);
  return r;
}
