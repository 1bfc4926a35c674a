// The package's entry for `import ... from "@statehost/sdk"`.
export * from "./assembly/index";
