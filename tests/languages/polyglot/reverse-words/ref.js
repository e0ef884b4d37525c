const words = require("fs").readFileSync(0, "utf8").trim().split(/\s+/);
console.log(words.reverse().join(" "));
