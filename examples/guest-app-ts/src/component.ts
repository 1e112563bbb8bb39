// The component's entry module: the contract's `log` import and the
// `reconciler` export. Only the component build reads this file (the
// import exists only inside a component); tests import `guest.ts`.
import * as log from "wasmctrl:controller/log@0.3.0";
import { exportGuest } from "wasmctrl-guest-sdk";

import { AppController } from "./guest.js";

export const reconciler = exportGuest(AppController, log.log);
