// Numbers as the console shows them: always with a unit, rounded so a
// changing value keeps its width (the cells use tabular figures).

// Each branch is chosen by the value as it will be printed, so 59.96 s is
// "1 min 0 s" rather than "60.0 s", and 119.6 s "2 min 0 s" rather than "1 min 60 s".

export function ms(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–';
  if (Math.round(value * 10) < 100) return `${value.toFixed(1)} ms`;
  if (Math.round(value) < 10_000) return `${Math.round(value)} ms`;
  return seconds(value / 1000);
}

export function seconds(value: number): string {
  if (Math.round(value * 10) < 600) return `${value.toFixed(1)} s`;
  const whole = Math.round(value);
  if (whole < 3600) return `${Math.floor(whole / 60)} min ${whole % 60} s`;
  const minutes = Math.round(value / 60);
  return `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

/** How long the edge has been up, to the minute (the header is redrawn every 2 s): "42 min", "3 h 5 min", "12 d 3 h". */
export function uptime(totalSeconds: number): string {
  const minutes = Math.floor(totalSeconds / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return `${hours} h ${minutes % 60} min`;
  return `${Math.floor(hours / 24)} d ${hours % 24} h`;
}

export function percent(ratio: number): string {
  return `${Math.round(ratio * 100)} %`;
}

export function bytes(value: number): string {
  if (value < 1024) return `${value} B`;
  if (value < 1024 * 1024) return `${(value / 1024).toFixed(1)} KiB`;
  return `${(value / 1024 / 1024).toFixed(1)} MiB`;
}

/** A count that only grows (requests, tokens): exact below 10,000, then "12.3 k", "456 k", "4.56 M", "12.3 M", so the cell keeps its width. */
export function count(value: number): string {
  // A key's tokens left is below 0 while it pays back a debt: "-24.0 k" in the units of the counts beside it, not "-24011".
  if (value < 0) return `-${count(-value)}`;
  if (value < 10_000) return String(value);
  const k1 = Math.round(value / 100) / 10;
  if (k1 < 100) return `${k1.toFixed(1)} k`;
  const k0 = Math.round(value / 1000);
  if (k0 < 1000) return `${k0} k`;
  const m2 = Math.round(value / 10_000) / 100;
  if (m2 < 10) return `${m2.toFixed(2)} M`;
  const m1 = Math.round(value / 100_000) / 10;
  if (m1 < 1000) return `${m1.toFixed(1)} M`;
  return `${(value / 1e9).toFixed(2)} G`;
}

export function rate(value: number, unit: string): string {
  return `${Math.round(value * 10) < 100 ? value.toFixed(1) : Math.round(value)} ${unit}`;
}

export function clock(iso: string | number): string {
  const d = new Date(iso);
  return d.toLocaleTimeString([], { hour12: false });
}
