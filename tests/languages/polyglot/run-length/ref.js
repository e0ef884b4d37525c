const s = require("fs").readFileSync(0, "utf8").trim();
console.log(s.replace(/(.)\1*/g, (run, c) => c + run.length));
