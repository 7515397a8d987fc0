// The `func` namespace (torch.func / JAX's transforms): grad, valueAndGrad, vjp, jvp.

export { grad, jvp, valueAndGrad, vjp, type GradOptions } from "./func.ts";
