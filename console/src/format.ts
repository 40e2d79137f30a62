// Numbers as the console shows them: always with a unit, rounded so a
// changing value keeps its width (the cells use tabular figures).

export function ms(value: number | null | undefined): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return '–';
  if (value < 10) return `${value.toFixed(1)} ms`;
  if (value < 10_000) return `${Math.round(value)} ms`;
  return seconds(value / 1000);
}

export function seconds(value: number): string {
  if (value < 60) return `${value.toFixed(1)} s`;
  if (value < 3600) return `${Math.floor(value / 60)} min ${Math.round(value % 60)} s`;
  return `${Math.floor(value / 3600)} h ${Math.floor((value % 3600) / 60)} min`;
}

export function percent(ratio: number): string {
  return `${Math.round(ratio * 100)} %`;
}

export function bytes(value: number): string {
  if (value < 1024) return `${value} B`;
  if (value < 1024 * 1024) return `${(value / 1024).toFixed(1)} KiB`;
  return `${(value / 1024 / 1024).toFixed(1)} MiB`;
}

export function rate(value: number, unit: string): string {
  return `${value < 10 ? value.toFixed(1) : Math.round(value)} ${unit}`;
}

export function clock(iso: string | number): string {
  const d = new Date(iso);
  return d.toLocaleTimeString([], { hour12: false });
}
