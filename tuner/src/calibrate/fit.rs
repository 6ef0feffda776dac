//! The numbers of calibration, over any residual function: knobs on the unit scale of their
//! ranges, residuals in units of the model's error scale, each through Huber's loss, and a
//! Gaussian prior of [`PRIOR_WIDTH`] about the catalog's values.
//!
//! The fit is damped Gauss-Newton on Huber's reweighted residuals (Levenberg-Marquardt with
//! iteratively reweighted least squares), kept inside the ranges; the posterior's sigma is
//! Laplace's, from the objective's curvature; a job is held out by refitting the others, or by
//! one Newton step from the fit of all without its residual.

use super::{HUBER, PRIOR_WIDTH};

/// Scaled residuals of every job at knobs `u` (unit scale).
pub type Residuals<'a> = dyn Fn(&[f64]) -> Vec<f64> + 'a;

/// Iterations of the damped Gauss-Newton fit, and its finite-difference step (unit scale).
const ITERATIONS: usize = 30;
const STEP: f64 = 0.005;

/// Within this of an end of its range a knob counts as at the bound.
const AT_BOUND: f64 = 1e-9;

/// Huber's loss at `c`: quadratic inside, linear outside.
pub fn huber(x: f64, c: f64) -> f64 {
    let a = x.abs();
    if a <= c {
        0.5 * a * a
    } else {
        c * (a - 0.5 * c)
    }
}

/// The negative log posterior of `u` given residuals `r` and the prior at `prior`.
fn objective_of(r: &[f64], prior: &[f64], u: &[f64]) -> f64 {
    let data: f64 = r.iter().map(|x| huber(*x, HUBER)).sum();
    let spring: f64 = u
        .iter()
        .zip(prior)
        .map(|(x, x0)| ((x - x0) / PRIOR_WIDTH).powi(2) / 2.0)
        .sum();
    data + spring
}

/// d residual / d knob by forward differences at `u`, one column per knob.
fn jacobian(f: &Residuals, u: &[f64], r: &[f64]) -> Vec<Vec<f64>> {
    (0..u.len())
        .map(|k| {
            let mut v = u.to_vec();
            // Step inward at the top of the range.
            let h = if v[k] + STEP <= 1.0 { STEP } else { -STEP };
            v[k] += h;
            f(&v).iter().zip(r).map(|(a, b)| (a - b) / h).collect()
        })
        .collect()
}

/// Huber's weights for the gradient: 1 inside the knee, c / |r| outside, so that a far-off
/// job pulls with a fixed force.
fn weights(r: &[f64]) -> Vec<f64> {
    r.iter()
        .map(|x| {
            if x.abs() <= HUBER {
                1.0
            } else {
                HUBER / x.abs()
            }
        })
        .collect()
}

/// Huber's second derivative: 1 inside the knee, 0 outside, where a job adds no curvature.
fn curvatures(r: &[f64]) -> Vec<f64> {
    r.iter()
        .map(|x| f64::from(u8::from(x.abs() <= HUBER)))
        .collect()
}

/// J^T W J plus the prior's 1 / width^2 on the diagonal.
fn curvature(jac: &[Vec<f64>], w: &[f64]) -> Vec<Vec<f64>> {
    let n = jac.len();
    let mut a = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..n {
            a[i][j] = (0..w.len()).map(|t| jac[i][t] * w[t] * jac[j][t]).sum();
        }
        a[i][i] += 1.0 / PRIOR_WIDTH.powi(2);
    }
    a
}

/// The objective's gradient: J^T W r plus the prior's pull.
fn gradient(jac: &[Vec<f64>], w: &[f64], r: &[f64], prior: &[f64], u: &[f64]) -> Vec<f64> {
    (0..u.len())
        .map(|k| {
            (0..r.len()).map(|t| jac[k][t] * w[t] * r[t]).sum::<f64>()
                + (u[k] - prior[k]) / PRIOR_WIDTH.powi(2)
        })
        .collect()
}

/// The Cholesky factor L (a = L L^T) of a symmetric positive definite matrix; `None` where it
/// is not positive definite.
fn cholesky(a: &[Vec<f64>]) -> Option<Vec<Vec<f64>>> {
    let n = a.len();
    let mut l = vec![vec![0.0; n]; n];
    for i in 0..n {
        for j in 0..=i {
            let s: f64 = (0..j).map(|k| l[i][k] * l[j][k]).sum();
            if i == j {
                let d = a[i][i] - s;
                if !(d > 0.0 && d.is_finite()) {
                    return None;
                }
                l[i][i] = d.sqrt();
            } else {
                l[i][j] = (a[i][j] - s) / l[j][j];
            }
        }
    }
    Some(l)
}

/// Solves a x = b for symmetric positive definite a, by Cholesky; `None` where it is not.
pub fn solve(a: &[Vec<f64>], b: &[f64]) -> Option<Vec<f64>> {
    let l = cholesky(a)?;
    let n = b.len();
    let mut y = vec![0.0; n];
    for i in 0..n {
        y[i] = (b[i] - (0..i).map(|k| l[i][k] * y[k]).sum::<f64>()) / l[i][i];
    }
    let mut x = vec![0.0; n];
    for i in (0..n).rev() {
        x[i] = (y[i] - (i + 1..n).map(|k| l[k][i] * x[k]).sum::<f64>()) / l[i][i];
    }
    Some(x)
}

/// The knobs that minimize the objective of `f` from `start`, kept inside the unit cube. A
/// knob no residual depends on has no pull but the prior's and stays at its value.
pub fn minimize(f: &Residuals, prior: &[f64], start: &[f64]) -> Vec<f64> {
    let mut u = start.to_vec();
    let mut r = f(&u);
    let mut best = objective_of(&r, prior, &u);
    let mut damping = 1.0;
    for _ in 0..ITERATIONS {
        let w = weights(&r);
        let jac = jacobian(f, &u, &r);
        let mut a = curvature(&jac, &w);
        let g: Vec<f64> = gradient(&jac, &w, &r, prior, &u)
            .iter()
            .map(|x| -x)
            .collect();
        let mut moved = false;
        while damping < 1e8 {
            for (k, row) in a.iter_mut().enumerate() {
                row[k] *= 1.0 + damping;
            }
            let step = solve(&a, &g);
            for (k, row) in a.iter_mut().enumerate() {
                row[k] /= 1.0 + damping;
            }
            let Some(step) = step else {
                damping *= 10.0;
                continue;
            };
            let trial: Vec<f64> = u
                .iter()
                .zip(&step)
                .map(|(x, d)| (x + d).clamp(0.0, 1.0))
                .collect();
            let trial_r = f(&trial);
            let score = objective_of(&trial_r, prior, &trial);
            if score < best {
                let size: f64 = trial.iter().zip(&u).map(|(a, b)| (a - b).abs()).sum();
                best = score;
                u = trial;
                r = trial_r;
                damping = (damping / 10.0).max(1e-6);
                moved = size > 1e-6;
                break;
            }
            damping *= 10.0;
        }
        if !moved {
            break;
        }
    }
    u
}

/// One sigma per knob (unit scale) at `u`: the inverse of the objective's curvature there
/// (Laplace's approximation of the posterior; a job past Huber's knee adds none). A knob at an
/// end of its range has a posterior cut there, which one sigma does not say.
pub fn posterior_sigma(f: &Residuals, u: &[f64]) -> Vec<f64> {
    let r = f(u);
    let a = curvature(&jacobian(f, u, &r), &curvatures(&r));
    (0..u.len())
        .map(|c| {
            let e: Vec<f64> = (0..u.len()).map(|i| f64::from(u8::from(i == c))).collect();
            solve(&a, &e).map_or(PRIOR_WIDTH, |x| x[c].sqrt())
        })
        .collect()
}

/// The fit of `f` without residual `i`, from `fit`, for each `i` of `n`: a fit of its own.
pub fn refits(f: &Residuals, n: usize, prior: &[f64], fit: &[f64]) -> Vec<Vec<f64>> {
    (0..n)
        .map(|i| {
            let without = |u: &[f64]| {
                let mut r = f(u);
                r.remove(i);
                r
            };
            minimize(&without, prior, fit)
        })
        .collect()
}

/// The fit without each residual in turn by one Newton step from `fit`, the fit of all: the
/// gradient of the others at the fit (the full gradient less the job's term; not zero where a
/// knob rests on a bound or the fit stopped early), over the knobs not at a bound, against the
/// curvature without the job's term (the approximate leave-one-out of Rad and Maleki 2020).
pub fn steps(f: &Residuals, prior: &[f64], fit: &[f64]) -> Vec<Vec<f64>> {
    let r = f(fit);
    let w = weights(&r);
    let jac = jacobian(f, fit, &r);
    let full = curvature(&jac, &w);
    let grad = gradient(&jac, &w, &r, prior, fit);
    let free: Vec<usize> = (0..fit.len())
        .filter(|&k| fit[k] > AT_BOUND && fit[k] < 1.0 - AT_BOUND)
        .collect();
    (0..r.len())
        .map(|i| {
            let ji: Vec<f64> = jac.iter().map(|col| col[i]).collect();
            let a: Vec<Vec<f64>> = free
                .iter()
                .map(|&p| {
                    free.iter()
                        .map(|&q| full[p][q] - w[i] * ji[p] * ji[q])
                        .collect()
                })
                .collect();
            let g: Vec<f64> = free
                .iter()
                .map(|&p| -(grad[p] - w[i] * r[i] * ji[p]))
                .collect();
            let mut u = fit.to_vec();
            if let Some(step) = solve(&a, &g) {
                for (&p, d) in free.iter().zip(step) {
                    u[p] = (u[p] + d).clamp(0.0, 1.0);
                }
            }
            u
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huber_is_quadratic_then_linear() {
        assert_eq!(huber(1.0, 1.5), 0.5);
        assert_eq!(huber(-1.5, 1.5), 1.125);
        // Past the knee: c (|x| - c/2) = 1.5 x (3 - 0.75).
        assert!((huber(3.0, 1.5) - 3.375).abs() < 1e-12);
    }

    /// [[4, 2], [2, 3]] x = [2, 1]: the inverse is [[3, -2], [-2, 4]] / 8, so x = [0.5, 0].
    #[test]
    fn solves_positive_definite_systems_and_refuses_others() {
        let x = solve(&[vec![4.0, 2.0], vec![2.0, 3.0]], &[2.0, 1.0]).unwrap();
        assert!((x[0] - 0.5).abs() < 1e-12 && x[1].abs() < 1e-12, "{x:?}");
        assert!(solve(&[vec![1.0, 2.0], vec![2.0, 1.0]], &[1.0, 1.0]).is_none());
    }

    /// Residuals linear in two knobs and small (inside Huber's knee), so the objective is
    /// 1/2 |A u - b|^2 + 1/2 |u - u0|^2 / w^2 with w = 0.08: its minimum is
    /// (A^T A + I/w^2)^-1 (A^T b + u0/w^2), its posterior covariance (A^T A + I/w^2)^-1, and
    /// each job held out has the same closed form without its row.
    fn linear() -> (Vec<[f64; 2]>, Vec<f64>, Vec<f64>) {
        let a = vec![[2.0, 0.5], [1.0, -1.0], [0.5, 2.0], [1.5, 1.0]];
        let b = vec![0.3, -0.2, 0.4, 0.1];
        (a, b, vec![0.5, 0.5])
    }

    fn closed_form(a: &[[f64; 2]], b: &[f64], u0: &[f64]) -> (Vec<f64>, Vec<Vec<f64>>) {
        let p = 1.0 / PRIOR_WIDTH.powi(2);
        let mut m = vec![vec![0.0; 2]; 2];
        let mut v = vec![u0[0] * p, u0[1] * p];
        for (row, bi) in a.iter().zip(b) {
            for i in 0..2 {
                for j in 0..2 {
                    m[i][j] += row[i] * row[j];
                }
                v[i] += row[i] * bi;
            }
        }
        m[0][0] += p;
        m[1][1] += p;
        (solve(&m, &v).unwrap(), m)
    }

    #[test]
    fn a_linear_problem_reaches_its_closed_form() {
        let (a, b, u0) = linear();
        let f = |u: &[f64]| -> Vec<f64> {
            a.iter()
                .zip(&b)
                .map(|(r, bi)| r[0] * u[0] + r[1] * u[1] - bi)
                .collect()
        };
        let (expected, m) = closed_form(&a, &b, &u0);
        let fit = minimize(&f, &u0, &u0);
        for k in 0..2 {
            assert!(
                (fit[k] - expected[k]).abs() < 1e-6,
                "{fit:?} vs {expected:?}"
            );
        }
        // The posterior sigma: the diagonal of the inverse curvature.
        let sigma = posterior_sigma(&f, &fit);
        for (k, s) in sigma.iter().enumerate() {
            let e: Vec<f64> = (0..2).map(|i| f64::from(u8::from(i == k))).collect();
            let var = solve(&m, &e).unwrap()[k];
            assert!((s - var.sqrt()).abs() < 1e-6, "{s} vs {}", var.sqrt());
        }
        // Held out one at a time: refits and one-step agree with the closed form, exactly
        // for a quadratic objective.
        let exact: Vec<Vec<f64>> = (0..a.len())
            .map(|i| {
                let (a_i, b_i): (Vec<[f64; 2]>, Vec<f64>) = a
                    .iter()
                    .zip(&b)
                    .enumerate()
                    .filter(|(t, _)| *t != i)
                    .map(|(_, (r, bi))| (*r, *bi))
                    .unzip();
                closed_form(&a_i, &b_i, &u0).0
            })
            .collect();
        for (got, want) in [refits(&f, a.len(), &u0, &fit), steps(&f, &u0, &fit)]
            .iter()
            .flat_map(|g| g.iter().zip(&exact))
        {
            for k in 0..2 {
                assert!((got[k] - want[k]).abs() < 1e-5, "{got:?} vs {want:?}");
            }
        }
    }

    /// A knob one job pulls past the top of its range rests there (its Huber force, 1.5 x 100,
    /// outweighs the spring's 0.5 / 0.08^2 = 78); the one-step refits then move only the free
    /// knob, by the others' gradient, as refitting does.
    #[test]
    fn a_knob_at_its_bound_stays_out_of_the_one_step_refits() {
        let f = |u: &[f64]| vec![(u[0] - 3.0) * 100.0, (u[1] - 0.4) * 2.0, (u[1] - 0.6) * 2.0];
        let prior = [0.5, 0.5];
        let fit = minimize(&f, &prior, &prior);
        assert!((fit[0] - 1.0).abs() < 1e-9, "{fit:?}");
        let stepped = steps(&f, &prior, &fit);
        let refit = refits(&f, 3, &prior, &fit);
        for (s, r) in stepped.iter().zip(&refit) {
            assert_eq!(s[0], 1.0);
            assert!((s[1] - r[1]).abs() < 1e-4, "{s:?} vs {r:?}");
        }
    }
}
