/* Each loop must be vectorized by gcc (run.sh checks -fopt-info-vec output, one line per loop). */
#include "../kiln_math.h"
void loop_expf(const float* __restrict__ x, float* __restrict__ y, int n) { for (int i = 0; i < n; i++) y[i] = kiln_expf(x[i]); }
void loop_expm1f(const float* __restrict__ x, float* __restrict__ y, int n) { for (int i = 0; i < n; i++) y[i] = kiln_expm1f(x[i]); }
void loop_logf(const float* __restrict__ x, float* __restrict__ y, int n) { for (int i = 0; i < n; i++) y[i] = kiln_logf(x[i]); }
void loop_log1pf(const float* __restrict__ x, float* __restrict__ y, int n) { for (int i = 0; i < n; i++) y[i] = kiln_log1pf(x[i]); }
void loop_tanhf(const float* __restrict__ x, float* __restrict__ y, int n) { for (int i = 0; i < n; i++) y[i] = kiln_tanhf(x[i]); }
void loop_logisticf(const float* __restrict__ x, float* __restrict__ y, int n) { for (int i = 0; i < n; i++) y[i] = kiln_logisticf(x[i]); }
void loop_erff(const float* __restrict__ x, float* __restrict__ y, int n) { for (int i = 0; i < n; i++) y[i] = kiln_erff(x[i]); }
/* a fused GELU-like kernel, as generated code would write it */
void loop_gelu(const float* __restrict__ x, float* __restrict__ y, int n) {
  for (int i = 0; i < n; i++) {
    float v = x[i];
    y[i] = 0.5f * v * (1.0f + kiln_tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
  }
}
