// The `autograd` namespace (PyTorch's torch.autograd): backward, grad, gradCheck, the grad-mode
// switches and anomaly detection.

export {
  backward,
  detectAnomaly,
  enableGrad,
  grad,
  GradNode,
  isGradEnabled,
  noGrad,
  setDetectAnomaly,
  setGradEnabled,
  type BackwardOptions,
  type GradOptions,
} from "./autograd.ts";
export {
  gradCheck,
  GradCheckError,
  type GradCheckOptions,
} from "./grad_check.ts";
